"""Spark adapter of the fraud engine: one stateful key per shard, inputs in arrival order.

The Flink demo broadcasts rules to every parallel instance and keys transactions dynamically.
Here each shard key owns the rules whose ruleId maps to it (control messages reach every
shard) and receives every transaction, so each (rule, grouping key) lives in exactly one
shard and the shards run in parallel, one per Spark task. Within a micro-batch a shard
applies its rows in the contract's arrival order (Kafka timestamp, a rule first on ties,
then topic, partition, offset); the source cuts batches on Kafka time across both topics,
so the order does not depend on batch boundaries. Outputs are rows of
`fraud.core.output_rows` (the driver path builds the same ones). A transaction too far
ahead of its Kafka time never reaches the engine (a `future` dead letter), and each message
goes through the engine isolated (fraud.core.isolation): no message can stop the query.

It runs under `transformWithStateInPandas`: a shard's rows arrive as Arrow-backed frames and
its outputs leave as one frame, no Row object either way. The engine is long-lived in the
executor's Python worker (resident.py) and a batch writes only its change log to Spark state
(shard_state.py); one event-time timer per shard runs the engine's clean-up.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.streaming.stateful_processor import (
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from spark_jobs.contracts.json_gate import DEFAULT_MAX_MESSAGE_BYTES
from spark_jobs.fraud.core.engine import FraudEngine, Output
from spark_jobs.fraud.core.isolation import apply_message
from spark_jobs.fraud.core.output_rows import (
    ARROW_OUTPUT_SCHEMA,
    arrival_order,
    output_fields,
)
from spark_jobs.fraud.processors import resident
from spark_jobs.fraud.processors.shard_state import EMPTY, Head, ShardState
from spark_jobs.streaming.bucketed.frames import record_type, to_frame
from spark_jobs.streaming.event_time import FUTURE_COLUMN
from spark_jobs.streaming.processor import keep_one_timer

OUTPUT_SCHEMA = from_arrow_schema(ARROW_OUTPUT_SCHEMA)
OUTPUT_NAMES = OUTPUT_SCHEMA.fieldNames()
INPUT_FIELDS = ("kind", "value", "kafka_topic", "kafka_partition", "kafka_offset",
                "kafka_timestamp", "kafka_key", FUTURE_COLUMN)
InputRecord = record_type(INPUT_FIELDS)


def _values(series: pd.Series) -> list[Any]:
    """A column as Python values, None for every null (None, NaN or pandas' NA)."""
    values = series.tolist()
    if series.hasnans:
        return [None if null else v for v, null in zip(values, series.isna().tolist(),
                                                        strict=True)]
    return values


def input_records(frames: Iterator[pd.DataFrame]) -> list[Any]:
    """A shard's rows of the batch as InputRecords, in arrival order."""
    found: list[Any] = []
    for frame in frames:
        if len(frame):
            columns = [_values(frame[name]) for name in INPUT_FIELDS]
            found.extend(map(InputRecord._make, zip(*columns, strict=True)))
    return sorted(found, key=arrival_order)


def output_values(shard: int, output: Output, source: Any) -> list[Any]:
    """One output as the values of an OUTPUT_SCHEMA row, in schema order."""
    fields = output_fields(shard, output, source)
    return [fields[name] for name in OUTPUT_NAMES]


class FraudShardProcessor(StatefulProcessor):
    """Rules and transactions of one shard through its resident FraudEngine.

    state_id: names the query's state (its checkpoint), so that the copies a worker keeps
    for one query are never offered to another."""

    def __init__(self, state_id: str, alert_on_late: bool, bucket_ms: int,
                 late_retention_ms: int,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        self.state_id = state_id
        self.alert_on_late = alert_on_late
        self.bucket_ms = bucket_ms
        self.late_retention_ms = late_retention_ms
        self.max_message_bytes = max_message_bytes

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.state = ShardState(handle)

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame],
                        timerValues: TimerValues) -> Iterator[pd.DataFrame]:
        shard = int(key[0])
        watermark = timerValues.getCurrentWatermarkInMs()
        inputs = input_records(rows)
        head, live = self._open(shard)
        now_ms = int(time.time() * 1000)
        out: list[list[Any]] = []
        for row in inputs:
            out.extend(output_values(shard, output, row)
                       for output in apply_message(live.engine, row, watermark, now_ms))
        self._close(shard, head, live, watermark)
        yield to_frame(out, OUTPUT_SCHEMA)

    def handleExpiredTimer(self, key: Any, timerValues: TimerValues, expiredTimerInfo: Any
                           ) -> Iterator[pd.DataFrame]:
        shard = int(key[0])
        watermark = timerValues.getCurrentWatermarkInMs()
        head, live = self._open(shard)
        live.engine.cleanup(watermark)
        self._close(shard, head, live, watermark)
        return iter(())

    def close(self) -> None:
        pass

    def _open(self, shard: int) -> tuple[Head | None, resident.Resident]:
        """The shard's engine at its stored version: the worker's copy when it has it."""
        head = self.state.head()
        copy = resident.take(self.state_id, shard)
        store, replayed = self.state.load(head, None if copy is None else copy.store,
                                          EMPTY if copy is None else copy.version)
        if copy is not None and replayed is not None:
            if head is not None and copy.version == head.version:
                resident.note("hits")
            else:  # brought forward: what another worker changed, into its indexes
                resident.note("caught_up")
                copy.engine.caught_up(replayed)
            return head, copy
        resident.note("rebuilt")
        engine = FraudEngine(store, self.alert_on_late, self.bucket_ms,
                             late_retention_ms=self.late_retention_ms,
                             max_message_bytes=self.max_message_bytes)
        return head, resident.Resident(store, engine, EMPTY)

    def _close(self, shard: int, head: Head | None, live: resident.Resident,
               watermark_ms: int) -> None:
        """Write the batch's changes, move the shard's timer to the engine's next clean-up,
        and keep the engine for the next batch."""
        live.version = self.state.commit(head, live.store)
        wanted = live.engine.next_cleanup_ms(watermark_ms)
        keep_one_timer(self.handle, self.handle.listTimers(), wanted, watermark_ms)
        resident.keep(self.state_id, shard, live)
