"""Spark adapter of per-user hourly capping (filter_events): keyed by user_id, rows in offset order.

Output rows carry `kind`: "ok" for accepted events, "dead" for rejected or late records.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import (
    TimerValues,
)
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from spark_jobs.experiments.core.capping import HourlyCap
from spark_jobs.experiments.core.windows import is_late
from spark_jobs.streaming.blob_state import BlobStateProcessor

CAPPED_EVENT_SCHEMA = StructType(
    [
        StructField("kind", StringType(), False),
        StructField("user_id", LongType(), True),
        StructField("event_type", StringType(), True),
        StructField("ts", LongType(), True),
        StructField("topic", StringType(), True),
        StructField("partition", IntegerType(), True),
        StructField("offset", LongType(), True),
        StructField("kafka_timestamp", LongType(), True),
        StructField("key", StringType(), True),
        StructField("raw_value", StringType(), True),
        StructField("reason", StringType(), True),
    ]
)


def _dead(row: Any, reason: str, raw_value: str | None) -> Row:
    return Row(
        kind="dead", user_id=row.user_id, event_type=row.event_type, ts=row.ts,
        topic=row.kafka_topic, partition=row.kafka_partition, offset=row.kafka_offset,
        kafka_timestamp=row.kafka_timestamp, key=row.kafka_key, raw_value=raw_value,
        reason=reason,
    )


def event_json(row: Any) -> str:
    """The stripped event as JSON text (what a late record looked like once decoded)."""
    return orjson.dumps(
        {"user_id": row.user_id, "event_type": row.event_type, "ts": row.ts}
    ).decode()


class HourlyCapProcessor(BlobStateProcessor):
    """First `cap` critical events per user and clock hour pass; late ones go to dead letters."""

    def __init__(self, cap: int) -> None:
        self.cap = cap

    def handleInputRows(
        self, key: Any, rows: Iterator[Row], timerValues: TimerValues
    ) -> Iterator[Row]:
        watermark = timerValues.getCurrentWatermarkInMs()
        ordered = sorted(rows, key=lambda r: (r.kafka_partition, r.kafka_offset))
        if key[0] is None:  # undecodable records have no user: straight to dead letters
            for row in ordered:
                yield _dead(row, row.error, row.raw_value)
            return
        payload, timer = self.state.load()
        counters = HourlyCap.from_bytes(self.cap, payload)
        counters.expire(watermark)
        for row in ordered:
            if row.error is not None:
                yield _dead(row, row.error, row.raw_value)
            elif is_late(row.ts, watermark):
                yield _dead(row, "late", event_json(row))
            elif counters.admit(row.ts):
                yield Row(
                    kind="ok", user_id=row.user_id, event_type=row.event_type, ts=row.ts,
                    topic=row.kafka_topic, partition=row.kafka_partition,
                    offset=row.kafka_offset, kafka_timestamp=row.kafka_timestamp,
                    key=row.kafka_key, raw_value=None, reason=None,
                )
        self.state.save(counters, timer, watermark)

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: Any
    ) -> Iterator[Row]:
        watermark = timerValues.getCurrentWatermarkInMs()
        payload, timer = self.state.load()
        counters = HourlyCap.from_bytes(self.cap, payload)
        counters.expire(watermark)
        self.state.save(counters, timer, watermark)
        return iter(())
