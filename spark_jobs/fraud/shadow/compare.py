"""The `fraud_alerts` rows of the job against the replay's expected alerts: counts, fields,
examples.

Pure Python on lists of dicts (one day of alerts fits in memory on the driver). Alerts are
paired by (rule_id, transaction_id), as often as the key occurs on both sides (taken in
topic, partition, offset order, so a key repeated on one side only shows as extra or
missing); paired alerts must agree exactly on grouping_key, aggregate and limit (the
engine's own decimal text: the job and the replay run the same engine). The match rate is
the share of matched alerts among every alert of either side.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

FIELDS = ("grouping_key", "aggregate", "limit")
MISSING_IN_STREAMING = "missing_in_streaming"
EXTRA_IN_STREAMING = "extra_in_streaming"
DIFFERS = "differs"
DEFAULT_EXAMPLES = 20

Row = Mapping[str, Any]
Key = tuple[Any, Any]


@dataclass(frozen=True)
class Difference:
    """One alert that does not agree; `fields` names what differs (empty if one side lacks it)."""

    rule_id: int | None
    transaction_id: str | None
    kind: str
    fields: list[str]
    streaming: dict[str, Any] | None
    expected: dict[str, Any] | None


@dataclass(frozen=True)
class AlertReport:
    """Streaming alerts against the replay over one set of transactions."""

    expected_alerts: int
    streaming_alerts: int
    matched: int
    missing_in_streaming: int
    extra_in_streaming: int
    differing: int
    field_differences: dict[str, int]
    duplicates_in_streaming: int  # extra alerts whose key the replay has fewer times
    left_out: int  # streaming alerts whose evaluation the job's batches could change
    match_rate: float
    examples: list[Difference] = field(default_factory=list)

    @property
    def agrees(self) -> bool:
        """Every expected alert found, with its fields, and nothing else."""
        return self.matched == self.expected_alerts == self.streaming_alerts

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form (for the results table or an alert's payload)."""
        return {**asdict(self), "agrees": self.agrees}


def _position(row: Row) -> tuple[str, int, int]:
    return (str(row.get("topic")), row.get("partition") or 0, row.get("offset") or 0)


def _by_key(rows: Iterable[Row]) -> dict[Key, list[dict[str, Any]]]:
    grouped: dict[Key, list[dict[str, Any]]] = defaultdict(list)
    for row in sorted(rows, key=_position):
        grouped[(row.get("rule_id"), row.get("transaction_id"))].append(dict(row))
    return grouped


def differing_fields(streaming: Row, expected: Row) -> list[str]:
    """The compared fields of two alerts with one key that differ."""
    return [name for name in FIELDS if streaming.get(name) != expected.get(name)]


def compare_alerts(streaming: Iterable[Row], expected: Iterable[Row], left_out: int = 0,
                   max_examples: int = DEFAULT_EXAMPLES) -> AlertReport:
    """Pair the alerts and count agreement; `left_out` is only reported."""
    got, want = _by_key(streaming), _by_key(expected)
    counts = dict.fromkeys(FIELDS, 0)
    differences: list[Difference] = []
    matched = differing = duplicates = 0
    for key in sorted(got.keys() | want.keys(), key=str):
        mine, theirs = got.get(key, []), want.get(key, [])
        for s_row, e_row in zip(mine, theirs, strict=False):
            fields = differing_fields(s_row, e_row)
            if not fields:
                matched += 1
                continue
            differing += 1
            for name in fields:
                counts[name] += 1
            differences.append(Difference(*key, DIFFERS, fields, s_row, e_row))
        differences += [Difference(*key, MISSING_IN_STREAMING, [], None, row)
                        for row in theirs[len(mine):]]
        differences += [Difference(*key, EXTRA_IN_STREAMING, [], row, None)
                        for row in mine[len(theirs):]]
        if theirs:
            duplicates += max(0, len(mine) - len(theirs))
    expected_count = sum(map(len, want.values()))
    streaming_count = sum(map(len, got.values()))
    paired = matched + differing
    compared = expected_count + streaming_count - paired  # alerts of either side
    return AlertReport(
        expected_alerts=expected_count, streaming_alerts=streaming_count, matched=matched,
        missing_in_streaming=expected_count - paired, extra_in_streaming=streaming_count - paired,
        differing=differing, field_differences=counts, duplicates_in_streaming=duplicates,
        left_out=left_out, match_rate=matched / compared if compared else 1.0,
        examples=_examples(differences, max_examples),
    )


def _examples(differences: list[Difference], limit: int) -> list[Difference]:
    """Up to `limit` differences, one of each kind in turn (keys in order within a kind)."""
    queues = [[d for d in differences if d.kind == kind]
              for kind in (DIFFERS, MISSING_IN_STREAMING, EXTRA_IN_STREAMING)]
    taken = [queue[index] for index in range(max(map(len, queues))) for queue in queues
             if index < len(queue)]
    return taken[:limit]


def in_day(rows: Iterable[Row], start_ms: int, end_ms: int) -> list[Row]:
    """The alerts whose transaction's eventTime lies in [start, end)."""
    return [row for row in rows
            if row.get("event_time") is not None and start_ms <= row["event_time"] < end_ms]


def decidable(rows: Iterable[Row], undecidable: Collection[tuple[Any, str, int, int]]
              ) -> tuple[list[Row], int]:
    """The alerts whose evaluation is not among `undecidable` (rule, topic, partition,
    offset), and how many were left out."""
    rows = list(rows)
    kept = [row for row in rows if (row.get("rule_id"), *_position(row)) not in undecidable]
    return kept, len(rows) - len(kept)
