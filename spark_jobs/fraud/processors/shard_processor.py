"""Spark adapter of the fraud engine: one stateful key per shard, inputs in arrival order.

The Flink demo broadcasts rules to every parallel instance and keys transactions dynamically.
Here each shard key owns the rules whose ruleId maps to it (control messages reach every
shard) and receives every transaction, so each (rule, grouping key) lives in exactly one
shard and the shards run in parallel. Within a micro-batch a shard applies its rows in the
contract's arrival order (Kafka timestamp, a rule first on ties, then topic, partition,
offset); the source cuts batches on Kafka time across both topics, so the order does not
depend on batch boundaries. Outputs carry the coordinates of the message that caused them so
the sink can order them and drop the copies that broadcast messages produce in every shard.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import (
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from spark_jobs.fraud.core.engine import FraudEngine, Output
from spark_jobs.fraud.processors.state_store import SparkShardStore

KIND_RULE = "rule"
KIND_TRANSACTION = "transaction"
OUTPUT_SCHEMA = StructType(
    [
        StructField("kind", StringType(), False),  # alert, rule_error, current_rule, dead_letter
        StructField("value", StringType(), True),  # the message text for its topic
        StructField("shard", IntegerType(), False),
        StructField("rule_id", LongType(), True),
        StructField("grouping_key", StringType(), True),
        StructField("aggregate", StringType(), True),  # exact decimal text
        StructField("limit", StringType(), True),
        StructField("transaction_id", StringType(), True),
        StructField("event_time", LongType(), True),
        StructField("alert_time", LongType(), True),
        StructField("reason", StringType(), True),
        StructField("topic", StringType(), True),
        StructField("partition", IntegerType(), True),
        StructField("offset", LongType(), True),
        StructField("kafka_timestamp", LongType(), True),
        StructField("key", StringType(), True),
    ]
)


def arrival_order(row: Any) -> tuple[int, int, str, int, int]:
    """Kafka time, a rule before a transaction on ties, then topic, partition, offset."""
    return (row.kafka_timestamp, 0 if row.kind == KIND_RULE else 1, row.kafka_topic,
            row.kafka_partition, row.kafka_offset)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return str(value) if isinstance(value, Decimal | int | str) else None


def output_row(shard: int, output: Output, source: Any) -> Row:
    data = output.data
    event = data.get("triggeringEvent") if output.kind == "alert" else None
    return Row(
        kind=output.kind, value=output.value, shard=shard,
        rule_id=data.get("ruleId") if isinstance(data.get("ruleId"), int) else None,
        grouping_key=data.get("groupingKey"), aggregate=_text(data.get("aggregate")),
        limit=_text(data.get("limit")),
        transaction_id=None if event is None else _text(event.get("transactionId")),
        event_time=None if event is None else event.get("eventTime"),
        alert_time=data.get("alertTime"),
        reason=data.get("reason") or data.get("error"),
        topic=source.kafka_topic, partition=source.kafka_partition, offset=source.kafka_offset,
        kafka_timestamp=source.kafka_timestamp, key=source.kafka_key,
    )


class FraudShardProcessor(StatefulProcessor):
    """Rules and transactions of one shard through a FraudEngine over Spark state."""

    def __init__(self, alert_on_late: bool, bucket_ms: int) -> None:
        self.alert_on_late = alert_on_late
        self.bucket_ms = bucket_ms

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.store = SparkShardStore(handle)

    def _engine(self) -> FraudEngine:
        self.store.reset()
        return FraudEngine(self.store, self.alert_on_late, self.bucket_ms)

    def handleInputRows(
        self, key: Any, rows: Iterator[Row], timerValues: TimerValues
    ) -> Iterator[Row]:
        shard = int(key[0])
        watermark = timerValues.getCurrentWatermarkInMs()
        now_ms = int(time.time() * 1000)
        engine = self._engine()
        out: list[Row] = []
        for row in sorted(rows, key=arrival_order):
            if row.kind == KIND_RULE:
                outputs = engine.on_rule(row.value, row.kafka_timestamp)
            else:
                outputs = engine.on_transaction(row.value, watermark, now_ms)
            out.extend(output_row(shard, output, row) for output in outputs)
        self._schedule_cleanup(engine, watermark)
        self.store.flush()
        return iter(out)

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: Any
    ) -> Iterator[Row]:
        watermark = timerValues.getCurrentWatermarkInMs()
        engine = self._engine()
        engine.cleanup(watermark)
        self._schedule_cleanup(engine, watermark)
        self.store.flush()
        return iter(())

    def _schedule_cleanup(self, engine: FraudEngine, watermark: int) -> None:
        """Keep exactly one event-time timer: the engine's next cleanup (whole seconds)."""
        wanted = engine.next_cleanup_ms(watermark)
        registered = list(self.handle.listTimers())
        for timer in registered:
            if timer != wanted and timer > watermark:
                self.handle.deleteTimer(timer)
        if wanted is not None and wanted not in registered:
            self.handle.registerTimer(wanted)

    def close(self) -> None:
        pass
