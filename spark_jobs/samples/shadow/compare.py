"""Streaming training samples against their batch recomputation: counts, schema, examples.

Pure Python on lists of dicts or pyarrow tables (one day of samples fits in memory on the
driver); no Spark, so the rules of agreement are unit-tested on their own. Samples are paired
by (sample_id, ts), the table's identity: a view_id re-sent after samples.dedup_ttl is a new
view under the same sample_id (CONTRACTS section 9). Those left unpaired are then paired by
sample_id alone, the nearest ts first, so that a sample with a wrong ts is reported as
differing in `ts` rather than as one missing and one extra. `context` is compared as parsed
JSON (key order and spacing are not part of the contract), every other field exactly; labels
field by field (`labels.<signal>`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from spark_jobs.contracts.tables import TRAINING_SAMPLES, training_samples

# Compared as they are; (sample_id, ts) pairs the samples, labels field by field.
SCALAR_FIELDS = TRAINING_SAMPLES.drop("sample_id", "labels").column_names
MISSING_IN_STREAMING = "missing_in_streaming"
EXTRA_IN_STREAMING = "extra_in_streaming"
DIFFERS = "differs"
DEFAULT_EXAMPLES = 20
_STRINGS = (pa.string(), pa.large_string(), pa.string_view())

Rows = pa.Table | Iterable[Mapping[str, Any]]


def _type_text(kind: pa.DataType) -> str:
    """A type's name with string flavours (string, large_string, string_view) made one."""
    if any(kind.equals(s) for s in _STRINGS):
        return "string"
    if pa.types.is_struct(kind):
        inner = ", ".join(f"{f.name}: {_type_text(f.type)}" for f in kind)
        return f"struct<{inner}>"
    return str(kind)


def _fields(schema: pa.Schema) -> list[str]:
    return [f"{f.name}: {_type_text(f.type)}" for f in schema]


@dataclass(frozen=True)
class SchemaCheck:
    """Field names, order and types of both sides against the contract (nullability ignored)."""

    agrees: bool
    expected: list[str]
    streaming: list[str] | None
    batch: list[str] | None
    problems: list[str]


def compare_schemas(
    streaming: pa.Schema | None, batch: pa.Schema | None, signals: Sequence[str]
) -> SchemaCheck:
    """Each given schema must equal the contract's; a side given as None is not checked."""
    expected = _fields(training_samples(signals).arrow_schema())
    problems = []
    sides = {"streaming": streaming, "batch": batch}
    listed: dict[str, list[str] | None] = {}
    for side, schema in sides.items():
        listed[side] = None if schema is None else _fields(schema)
        if listed[side] is not None and listed[side] != expected:
            got = listed[side] or []
            wrong = [f"{g!r} (expected {e!r})" for g, e in zip(got, expected, strict=False)
                     if g != e]
            if len(got) != len(expected):
                wrong.append(f"{len(got)} fields, expected {len(expected)}")
            problems.append(f"{side}: " + "; ".join(wrong))
    return SchemaCheck(not problems, expected, listed["streaming"], listed["batch"], problems)


@dataclass(frozen=True)
class Difference:
    """One sample that does not agree; `fields` names what differs (empty if one side lacks it)."""

    sample_id: str
    kind: str
    fields: list[str]
    streaming: dict[str, Any] | None
    batch: dict[str, Any] | None


@dataclass(frozen=True)
class ShadowReport:
    """Streaming vs batch over one set of samples; `match_rate` = matched / samples on either
    side (batch samples plus those only streaming has; 1 when both sides are empty)."""

    batch_samples: int
    streaming_samples: int
    matched: int
    missing_in_streaming: int
    extra_in_streaming: int
    differing: int
    field_differences: dict[str, int]
    # a (sample_id, ts) written again, or a sample of an id beyond the batch's count of it
    # (also among the extra ones): the streaming side repeated a view
    duplicates_in_streaming: int
    duplicates_in_batch: int
    match_rate: float
    schema: SchemaCheck
    examples: list[Difference] = field(default_factory=list)

    @property
    def agrees(self) -> bool:
        """Every batch sample matched, nothing extra or repeated, and the schemas agree."""
        return (
            self.matched == self.batch_samples == self.streaming_samples
            and self.duplicates_in_streaming == 0
            and self.schema.agrees
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form (for a results table or an alert's payload)."""
        return {**asdict(self), "agrees": self.agrees}


def _rows(samples: Rows) -> list[dict[str, Any]]:
    if isinstance(samples, pa.Table):
        return samples.to_pylist()
    return [dict(row) for row in samples]


Identity = tuple[Any, Any]  # (sample_id, ts)


def _by_identity(rows: list[dict[str, Any]]) -> tuple[dict[Identity, dict[str, Any]], int]:
    """Rows by (sample_id, ts) (first one kept) and how many rows repeated one."""
    found: dict[Identity, dict[str, Any]] = {}
    for row in rows:
        found.setdefault((row.get("sample_id"), row.get("ts")), row)
    return found, len(rows) - len(found)


def _distance(a: Identity, b: Identity) -> tuple[bool, int]:
    """How far apart two samples of one id are in ts (a missing ts: farther than any)."""
    if a[1] is None or b[1] is None:
        return True, 0
    return False, abs(a[1] - b[1])


def _pair_leftovers(streaming: list[Identity], batch: list[Identity]
                    ) -> tuple[list[tuple[Identity, Identity]], list[Identity], list[Identity]]:
    """Unpaired samples of both sides paired by sample_id alone, the nearest ts first: the
    pairs, then the batch's and the streaming side's samples still alone."""
    by_id: dict[Any, list[Identity]] = {}
    for identity in streaming:
        by_id.setdefault(identity[0], []).append(identity)
    candidates = sorted(
        ((_distance(s, b), str(b[0]), _order(b), _order(s), s, b)
         for b in batch for s in by_id.get(b[0], ())), key=lambda c: c[:4])
    pairs: list[tuple[Identity, Identity]] = []
    taken: set[Identity] = set()
    for *_, s, b in candidates:
        if s not in taken and b not in taken:
            pairs.append((s, b))
            taken.update((s, b))
    return (pairs, sorted((b for b in batch if b not in taken), key=_order),
            sorted((s for s in streaming if s not in taken), key=_order))


def _order(identity: Identity) -> tuple[str, bool, int]:
    """A deterministic order of samples: by sample_id (as text), then ts (missing last)."""
    return str(identity[0]), identity[1] is None, identity[1] or 0


def _json(text: Any) -> tuple[bool, Any]:
    try:
        return True, json.loads(text)
    except (TypeError, ValueError):
        return False, text


def _same_context(a: Any, b: Any) -> bool:
    ok_a, parsed_a = _json(a)
    ok_b, parsed_b = _json(b)
    return ok_a == ok_b and parsed_a == parsed_b


def _label_value(labels: Any, signal: str) -> Any:
    if not isinstance(labels, Mapping) or signal not in labels:
        return None
    value = labels[signal]
    return int(value) if isinstance(value, bool) else value


def differing_fields(
    streaming: Mapping[str, Any], batch: Mapping[str, Any], signals: Sequence[str]
) -> list[str]:
    """The fields of two samples with one sample_id that differ, in schema order."""
    out = []
    for name in SCALAR_FIELDS:
        a, b = streaming.get(name), batch.get(name)
        same = _same_context(a, b) if name == "context" else a == b and type(a) is type(b)
        if not same:
            out.append(name)
    s_labels, b_labels = streaming.get("labels"), batch.get("labels")
    for signal in signals:
        if _label_value(s_labels, signal) != _label_value(b_labels, signal):
            out.append(f"labels.{signal}")
    extra = {
        key
        for labels in (s_labels, b_labels) if isinstance(labels, Mapping)
        for key in labels if key not in signals
    }
    out.extend(f"labels.{key}" for key in sorted(extra))  # a label outside the config
    return out


def compare_samples(
    streaming: Rows,
    batch: Rows,
    signals: Sequence[str],
    max_examples: int = DEFAULT_EXAMPLES,
    streaming_schema: pa.Schema | None = None,
    batch_schema: pa.Schema | None = None,
) -> ShadowReport:
    """Pair samples by (sample_id, ts), then by sample_id, and count agreement. Schemas are
    taken from pyarrow tables, or given; a side without one is not schema-checked."""
    if isinstance(streaming, pa.Table) and streaming_schema is None:
        streaming_schema = streaming.schema
    if isinstance(batch, pa.Table) and batch_schema is None:
        batch_schema = batch.schema
    s_rows, s_repeats = _by_identity(_rows(streaming))
    b_rows, b_repeats = _by_identity(_rows(batch))
    field_counts = {name: 0 for name in [*SCALAR_FIELDS, *(f"labels.{s}" for s in signals)]}
    differences: list[Difference] = []
    matched = 0
    pairs = [(i, i) for i in b_rows if i in s_rows]
    leftovers, missing, extra = _pair_leftovers([i for i in s_rows if i not in b_rows],
                                                [i for i in b_rows if i not in s_rows])
    for got, expected in (*pairs, *leftovers):
        fields = differing_fields(s_rows[got], b_rows[expected], signals)
        if not fields:
            matched += 1
            continue
        for name in fields:
            field_counts[name] = field_counts.get(name, 0) + 1
        differences.append(Difference(expected[0], DIFFERS, fields, s_rows[got],
                                      b_rows[expected]))
    differences += [Difference(i[0], MISSING_IN_STREAMING, [], None, b_rows[i])
                    for i in missing]
    differences += [Difference(i[0], EXTRA_IN_STREAMING, [], s_rows[i], None) for i in extra]
    differing = len(pairs) + len(leftovers) - matched
    # an id the streaming side holds more often than the batch: a re-send the de-duplication
    # should have dropped (within samples.dedup_ttl), so a duplicate as much as an extra
    alone = set(missing)
    paired = {identity[0] for identity in b_rows if identity not in alone}
    repeated_ids = sum(1 for identity in extra if identity[0] in paired)
    return ShadowReport(
        batch_samples=len(b_rows) + b_repeats,
        streaming_samples=len(s_rows) + s_repeats,
        matched=matched,
        missing_in_streaming=len(missing),
        extra_in_streaming=len(extra),
        differing=differing,
        field_differences=field_counts,
        duplicates_in_streaming=s_repeats + repeated_ids,
        duplicates_in_batch=b_repeats,
        match_rate=_rate(matched, len(b_rows) + b_repeats + len(extra)),
        schema=compare_schemas(streaming_schema, batch_schema, signals),
        examples=_examples(differences, max_examples),
    )


def _rate(matched: int, compared: int) -> float:
    return matched / compared if compared else 1.0


def _examples(differences: list[Difference], limit: int) -> list[Difference]:
    """Up to `limit` differences, taken in turn from each kind (by sample_id and ts within
    a kind)."""
    queues = [
        sorted((d for d in differences if d.kind == kind), key=_example_order)
        for kind in (DIFFERS, MISSING_IN_STREAMING, EXTRA_IN_STREAMING)
    ]
    out: list[Difference] = []
    for index in range(max((len(q) for q in queues), default=0)):
        out += [q[index] for q in queues if index < len(q)]
        if len(out) >= limit:
            break
    return out[:limit]


def _example_order(difference: Difference) -> tuple[str, bool, int]:
    row = difference.batch if difference.batch is not None else difference.streaming
    return _order((difference.sample_id, (row or {}).get("ts")))


def in_period(samples: Rows, start_ms: int, end_ms: int) -> Rows:
    """The samples with start <= ts < end (a pyarrow table stays a table)."""
    if isinstance(samples, pa.Table):
        ts = samples.column("ts")
        return samples.filter(pc.and_(pc.greater_equal(ts, start_ms), pc.less(ts, end_ms)))
    return [row for row in samples if row.get("ts") is not None and start_ms <= row["ts"] < end_ms]
