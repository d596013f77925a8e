"""The `dead_letters` Delta table: every rejected or late record, with where it came from.

One Arrow schema shared by every job, so the table never needs a schema change and a
message that is not even UTF-8 still gets stored (undecodable bytes are replaced).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import pyarrow as pa

from spark_jobs.contracts.tables import DEAD_LETTERS

DEAD_LETTER_SCHEMA = DEAD_LETTERS.arrow_schema()


def _text(value: str | bytes | None) -> str | None:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", errors="replace")
    return value


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
    recorded_at: datetime | None = None,
) -> pa.Table:
    """Column lists (one entry per record) to a dead-letter table; one recorded_at per batch."""
    columns = {
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "kafka_timestamp": kafka_timestamp,
        "key": key,
        "raw_value": raw_value,
        "reason": reason,
    }
    lengths = {name: len(values) for name, values in columns.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"dead-letter columns differ in length: {lengths}")
    n = len(reason)
    stamp = recorded_at or datetime.now(UTC)
    if stamp.tzinfo is None:
        raise ValueError("recorded_at must be timezone-aware (UTC)")
    values = {
        **columns,
        "job": [job] * n,
        "key": [_text(k) for k in key],
        "raw_value": [_text(v) for v in raw_value],
        "recorded_at": [stamp] * n,
    }
    return pa.Table.from_pydict(
        {name: list(values[name]) for name in DEAD_LETTER_SCHEMA.names}, schema=DEAD_LETTER_SCHEMA
    )


def empty_dead_letters() -> pa.Table:
    """A table with no rows and the dead-letter schema (e.g. to create the table)."""
    return DEAD_LETTER_SCHEMA.empty_table()


# -- one dead letter, as every system builds it ------------------------------------------------
LATE = "late"  # the reason of a record behind the watermark, in every job
KIND_DEAD = "dead"  # the `kind` of a dead-letter row in a processor's output
DEAD_LETTER_COLUMNS = ("topic", "partition", "offset", "kafka_timestamp", "key", "raw_value",
                       "reason")  # what a job's output row carries for the table, per record


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

    def columns(self) -> dict[str, Any]:
        """The DEAD_LETTER_COLUMNS of this record."""
        return {**origin_columns(self.source), "raw_value": self.raw, "reason": self.reason}


def dead_letter_table(job: str, rows: pa.Table, recorded_at: datetime | None = None
                      ) -> pa.Table:
    """A job's dead rows (any table with DEAD_LETTER_COLUMNS) as `dead_letters` rows."""
    columns = {name: rows[name].to_pylist() for name in DEAD_LETTER_COLUMNS}
    return dead_letter_rows(job, **columns, recorded_at=recorded_at)
