"""The `dead_letters` Delta table: every rejected or late record, with where it came from.

One Arrow schema shared by every job, so the table never needs a schema change and a
message that is not even UTF-8 still gets stored (undecodable bytes are replaced).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

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
