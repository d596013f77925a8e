"""Spark adapter of the fraud engine: one stateful key per shard, inputs in arrival order.

The Flink demo broadcasts rules to every parallel instance and keys transactions dynamically.
Here each shard key owns the rules whose ruleId maps to it (control messages reach every
shard) and receives every transaction, so each (rule, grouping key) lives in exactly one
shard and the shards run in parallel. Within a micro-batch a shard applies its rows in the
contract's arrival order (Kafka timestamp, a rule first on ties, then topic, partition,
offset); the source cuts batches on Kafka time across both topics, so the order does not
depend on batch boundaries. Outputs are rows of `fraud.core.output_rows` (the driver path
builds the same ones). A transaction too far ahead of its Kafka time never reaches the
engine (the base makes it a `future` dead letter), and each message goes through the engine
isolated (fraud.core.isolation): no message can stop the query.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from pyspark.sql import Row
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.streaming.stateful_processor import StatefulProcessorHandle

from spark_jobs.contracts.json_gate import DEFAULT_MAX_MESSAGE_BYTES
from spark_jobs.fraud.core.engine import FraudEngine, Output
from spark_jobs.fraud.core.isolation import apply_rule, apply_transaction
from spark_jobs.fraud.core.output_rows import (
    ARROW_OUTPUT_SCHEMA,
    KIND_RULE,
    arrival_order,
    output_fields,
)
from spark_jobs.fraud.core.outputs import dead_letter
from spark_jobs.fraud.processors.state_store import SparkShardStore
from spark_jobs.streaming.processor import KeyedProcessor

OUTPUT_SCHEMA = from_arrow_schema(ARROW_OUTPUT_SCHEMA)


def output_row(shard: int, output: Output, source: Any) -> Row:
    return Row(**output_fields(shard, output, source))


class FraudShardProcessor(KeyedProcessor):
    """Rules and transactions of one shard through a FraudEngine over Spark state."""

    def __init__(self, alert_on_late: bool, bucket_ms: int, late_retention_ms: int,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        super().__init__(OUTPUT_SCHEMA)
        self.alert_on_late = alert_on_late
        self.bucket_ms = bucket_ms
        self.late_retention_ms = late_retention_ms
        self.max_message_bytes = max_message_bytes

    def open(self, handle: StatefulProcessorHandle) -> None:
        self.store = SparkShardStore(handle)

    def _engine(self) -> FraudEngine:
        self.store.reset()
        return FraudEngine(self.store, self.alert_on_late, self.bucket_ms,
                           late_retention_ms=self.late_retention_ms,
                           max_message_bytes=self.max_message_bytes)

    def on_rows(self, key: Any, rows: Iterator[Row], watermark_ms: int) -> Iterator[Row]:
        shard = int(key[0])
        now_ms = int(time.time() * 1000)
        engine = self._engine()
        out: list[Row] = []
        for row in sorted(rows, key=arrival_order):
            if row.kind == KIND_RULE:
                outputs = apply_rule(engine, row.value, row.kafka_timestamp, watermark_ms)
            else:
                outputs = apply_transaction(engine, row.value, watermark_ms, now_ms)
            out.extend(output_row(shard, output, row) for output in outputs)
        self._schedule_cleanup(engine, watermark_ms)
        self.store.flush()
        return iter(out)

    def dead(self, row: Any, reason: str, raw_value: str | None, detail: str | None = None
             ) -> Row:
        """The base's dead letters (a transaction from the future) in this job's row shape."""
        letter = dead_letter(reason, raw_value or "", detail or "")
        return output_row(int(getattr(row, "shard", 0) or 0), letter, row)

    def on_timer(self, key: Any, watermark_ms: int) -> Iterator[Row]:
        engine = self._engine()
        engine.cleanup(watermark_ms)
        self._schedule_cleanup(engine, watermark_ms)
        self.store.flush()
        return iter(())

    def _schedule_cleanup(self, engine: FraudEngine, watermark_ms: int) -> None:
        """One event-time timer per shard: the engine's next cleanup (whole seconds)."""
        wanted = engine.next_cleanup_ms(watermark_ms)
        self.keep_timer(self.handle.listTimers(), wanted, watermark_ms)
