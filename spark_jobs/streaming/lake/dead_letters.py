"""The `dead_letters` Delta table: every rejected or late record, with where it came from.

One Arrow schema shared by every job. The evidence is kept as received (CONTRACTS section 9):
the first 64 KiB of the raw bytes and the original length, plus the same bytes as text for a
person reading the table (invalid UTF-8 replaced); `reason` is a short code
(contracts.reasons) and `detail` says what exactly is wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import pyarrow as pa

from spark_jobs.contracts.reasons import LATE  # noqa: F401  (re-exported: every job's)
from spark_jobs.contracts.tables import DEAD_LETTER_RAW_BYTES, DEAD_LETTERS

DEAD_LETTER_SCHEMA = DEAD_LETTERS.arrow_schema()
MAX_DETAIL_CHARS = 2_000


def _text(value: str | bytes | None) -> str | None:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value[:DEAD_LETTER_RAW_BYTES]).decode("utf-8", errors="replace")
    return None if value is None else value[:DEAD_LETTER_RAW_BYTES]


def _bytes(value: str | bytes | None) -> bytes | None:
    """The value's bytes (text as UTF-8, lone surrogates kept as they came)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    return bytes(value)


def _detail(text: str | None) -> str | None:
    return None if text is None else text[:MAX_DETAIL_CHARS]


def dead_letter_rows(
    job: str,
    *,
    topic: Sequence[str | None],
    partition: Sequence[int | None],
    offset: Sequence[int | None],
    kafka_timestamp: Sequence[int | None],
    key: Sequence[str | bytes | None],
    raw_value: Sequence[str | bytes | None],
    reason: Sequence[str],
    detail: Sequence[str | None] | None = None,
    recorded_at: datetime | None = None,
) -> pa.Table:
    """Column lists (one entry per record) to a dead-letter table; one recorded_at per batch.
    `raw_value` is the message as received: bytes, or text when only that is known."""
    detail = [None] * len(reason) if detail is None else detail
    columns = {
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "kafka_timestamp": kafka_timestamp,
        "key": key,
        "raw_value": raw_value,
        "reason": reason,
        "detail": detail,
    }
    lengths = {name: len(values) for name, values in columns.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"dead-letter columns differ in length: {lengths}")
    n = len(reason)
    stamp = recorded_at or datetime.now(UTC)
    if stamp.tzinfo is None:
        raise ValueError("recorded_at must be timezone-aware (UTC)")
    raw = [_bytes(v) for v in raw_value]
    values = {
        **columns,
        "job": [job] * n,
        "key": [_text(k) for k in key],
        "raw_value": [_text(v) for v in raw],
        "raw_bytes": [None if v is None else v[:DEAD_LETTER_RAW_BYTES] for v in raw],
        "raw_length": [None if v is None else len(v) for v in raw],
        "detail": [_detail(d) for d in detail],
        "recorded_at": [stamp] * n,
    }
    return pa.Table.from_pydict(
        {name: list(values[name]) for name in DEAD_LETTER_SCHEMA.names}, schema=DEAD_LETTER_SCHEMA
    )


def empty_dead_letters() -> pa.Table:
    """A table with no rows and the dead-letter schema (e.g. to create the table)."""
    return DEAD_LETTER_SCHEMA.empty_table()


# -- one dead letter, as every system builds it ------------------------------------------------
KIND_DEAD = "dead"  # the `kind` of a dead-letter row in a processor's output
KIND_DROPPED = "dropped"  # a count of records filtered out by design: `reason`, `dropped`
DROPPED_COLUMN = "dropped"
DEAD_LETTER_COLUMNS = ("topic", "partition", "offset", "kafka_timestamp", "key", "raw_value",
                       "reason", "detail")  # what a job's output row carries, per record


class Origin(Protocol):
    """Where a record came from: its Kafka coordinates (e.g. samples.core.records.Source)."""

    @property
    def topic(self) -> str | None: ...
    @property
    def partition(self) -> int | None: ...
    @property
    def offset(self) -> int | None: ...
    @property
    def kafka_timestamp(self) -> int | None: ...
    @property
    def key(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class KafkaOrigin:
    """The coordinates of a row of the Kafka source (its `kafka_*` columns)."""

    topic: str | None
    partition: int | None
    offset: int | None
    kafka_timestamp: int | None
    key: str | None

    @classmethod
    def of(cls, row: Any) -> KafkaOrigin:
        return cls(row.kafka_topic, row.kafka_partition, row.kafka_offset, row.kafka_timestamp,
                   row.kafka_key)


def origin_columns(origin: Origin) -> dict[str, Any]:
    """The coordinate columns of an output row (dead letters, and what else keeps them)."""
    return {"topic": origin.topic, "partition": origin.partition, "offset": origin.offset,
            "kafka_timestamp": origin.kafka_timestamp, "key": origin.key}


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A record a job cannot use: why, its received (or decoded) text, where it came from.
    Pure data, so a domain core can emit it; processors turn it into output columns."""

    reason: str
    raw: str | None
    source: Origin
    detail: str | None = None

    def columns(self) -> dict[str, Any]:
        """The DEAD_LETTER_COLUMNS of this record."""
        return {**origin_columns(self.source), "raw_value": self.raw, "reason": self.reason,
                "detail": self.detail}


RawLookup = Callable[[list[tuple[str, int, int]]], dict[tuple[str, int, int], bytes | None]]
HoldsReceived = Callable[[str, str | None], bool]  # (reason, the row's text) -> it is the record


def dead_letter_table(job: str, rows: pa.Table, recorded_at: datetime | None = None,
                      raw_lookup: RawLookup | None = None,
                      holds_received: HoldsReceived | None = None) -> pa.Table:
    """A job's dead rows (any table with DEAD_LETTER_COLUMNS) as `dead_letters` rows.

    `raw_lookup` reads the received bytes back by coordinates (streaming/kafka/evidence.py):
    a processor's row carries the record as it decoded it, the table wants it as received;
    a record it cannot find keeps the text the row carried. `holds_received(reason, text)`
    says which rows already carry the record exactly as received (they are not looked up)."""
    n = rows.num_rows
    columns = {name: rows[name].to_pylist() if name in rows.column_names else [None] * n
               for name in DEAD_LETTER_COLUMNS}  # (`detail` may be absent: no detail)
    if raw_lookup is not None:
        columns["raw_value"] = _as_received(columns, raw_lookup, holds_received)
    return dead_letter_rows(job, **columns, recorded_at=recorded_at)


def _as_received(columns: dict[str, list[Any]], raw_lookup: RawLookup,
                 holds_received: HoldsReceived | None = None) -> list[str | bytes | None]:
    places = list(zip(columns["topic"], columns["partition"], columns["offset"], strict=True))
    held = ([False] * len(places) if holds_received is None else
            [holds_received(reason, text) for reason, text in
             zip(columns["reason"], columns["raw_value"], strict=True)])
    wanted = [place for place, whole in zip(places, held, strict=True)
              if None not in place and not whole]
    found = raw_lookup(wanted) if wanted else {}
    texts = columns["raw_value"]
    return [found.get(place, text) for place, text in zip(places, texts, strict=True)]
