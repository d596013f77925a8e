"""Spark adapter of per-user hourly capping (filter_events): keyed by user_id, rows in offset order.

Output rows carry `kind`: "ok" for accepted events, "dead" for rejected or late records, and
"dropped" with the count of capped events (CONTRACTS section 9: nothing dropped uncounted).
Each record goes through `per_record.each_record`: one that raises becomes an `error` dead
letter and the hour counters stay as they were (a counter moves only once the row is built).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import orjson
from pyspark.sql import Row
from pyspark.sql.types import LongType, StringType, StructField

from spark_jobs.contracts.reasons import CAPPED, LATE
from spark_jobs.experiments.core.capping import HourlyCap
from spark_jobs.experiments.core.tumbling_windows import is_late, late_detail
from spark_jobs.experiments.processors.per_record import each_record
from spark_jobs.streaming.blob_state import BlobStateProcessor
from spark_jobs.streaming.processor import output_schema

CAPPED_EVENT_SCHEMA = output_schema(
    StructField("user_id", LongType(), True),
    StructField("event_type", StringType(), True),
    StructField("ts", LongType(), True),
)


def event_json(row: Any) -> str:
    """The stripped event as JSON text (what a late record looked like once decoded)."""
    return orjson.dumps(
        {"user_id": row.user_id, "event_type": row.event_type, "ts": row.ts}
    ).decode()


def _in_offset_order(rows: Iterable[Row]) -> list[Row]:
    return sorted(rows, key=lambda r: (r.kafka_partition, r.kafka_offset))


class HourlyCapProcessor(BlobStateProcessor):
    """First `cap` critical events per user and clock hour pass; late ones go to dead letters."""

    kept_on_dead = ("user_id", "event_type", "ts")

    def __init__(self, cap: int) -> None:
        super().__init__(CAPPED_EVENT_SCHEMA)
        self.cap = cap

    def unkeyed(self, rows: Iterable[Row]) -> Iterator[Row]:
        return super().unkeyed(_in_offset_order(rows))

    def on_rows(self, key: Any, rows: Iterator[Row], watermark_ms: int) -> Iterator[Row]:
        payload, timer = self.state.load()
        counters = HourlyCap.from_bytes(self.cap, payload)
        counters.expire(watermark_ms)
        yield from self.cap_rows(counters, rows, watermark_ms)
        self.state.save(counters, timer, watermark_ms)

    def cap_rows(self, counters: HourlyCap, rows: Iterable[Row], watermark_ms: int
                 ) -> Iterator[Row]:
        """The output of one key's rows in offset order, counting into `counters`."""
        return each_record(self, _in_offset_order(rows),
                           lambda row: self.one_event(counters, row, watermark_ms))

    def one_event(self, counters: HourlyCap, row: Row, watermark_ms: int) -> tuple[Row, ...]:
        """One record's output: accepted, capped (a count), late or undecodable."""
        if row.error is not None:
            return (self.undecodable(row),)
        if is_late(row.ts, watermark_ms):
            return (self.dead(row, LATE, event_json(row), late_detail(row.ts, watermark_ms)),)
        accepted = self.row(
            "ok", user_id=row.user_id, event_type=row.event_type, ts=row.ts,
            topic=row.kafka_topic, partition=row.kafka_partition,
            offset=row.kafka_offset, kafka_timestamp=row.kafka_timestamp,
            key=row.kafka_key,
        )
        return (accepted,) if counters.admit(row.ts) else (self.dropped(CAPPED, 1),)

    def on_timer(self, key: Any, watermark_ms: int) -> Iterator[Row]:
        payload, timer = self.state.load()
        counters = HourlyCap.from_bytes(self.cap, payload)
        counters.expire(watermark_ms)
        self.state.save(counters, timer, watermark_ms)
        return iter(())
