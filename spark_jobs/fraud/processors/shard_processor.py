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
its outputs leave as one frame, no Row object either way. The engine is long-lived in a
process of the executor, one per shard (shard_host.py), which every Python worker of the
executor reaches; a batch writes only its change log to Spark state (shard_state.py); one
event-time timer per shard runs the engine's clean-up.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.streaming.stateful_processor import (
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from spark_jobs.contracts.json_gate import DEFAULT_MAX_MESSAGE_BYTES
from spark_jobs.fraud.core.output_rows import ARROW_OUTPUT_SCHEMA
from spark_jobs.fraud.processors.shard_host import INPUT_FIELDS, EngineSpec
from spark_jobs.fraud.processors.shard_host_client import ShardHostConnection, shard_host
from spark_jobs.fraud.processors.shard_load import Version
from spark_jobs.fraud.processors.shard_state import Head, ShardState
from spark_jobs.streaming.bucketed.frames import column_values, to_frame
from spark_jobs.streaming.processor import keep_one_timer

if TYPE_CHECKING:  # pandas is imported where frames are built: the driver's state-schema
    import pandas as pd  # worker loads this module at every query start, without pandas

OUTPUT_SCHEMA = from_arrow_schema(ARROW_OUTPUT_SCHEMA)


def input_columns(frames: Iterator[pd.DataFrame]) -> list[list[Any]]:
    """A shard's rows of the batch as INPUT_FIELDS columns of Python values (the host puts
    them in arrival order)."""
    columns: list[list[Any]] = [[] for _ in INPUT_FIELDS]
    for frame in frames:
        if len(frame):
            for column, name in zip(columns, INPUT_FIELDS, strict=True):
                column.extend(column_values(frame[name]))
    return columns


class FraudShardProcessor(StatefulProcessor):
    """Rules and transactions of one shard through the shard's engine on this executor.

    state_id: names the query's state (its checkpoint), so that the engine a host keeps
    for one query is never offered to another."""

    def __init__(self, state_id: str, alert_on_late: bool, bucket_ms: int,
                 late_retention_ms: int,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        self.state_id = state_id
        self.spec = EngineSpec(alert_on_late, bucket_ms, late_retention_ms, max_message_bytes)

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.state = ShardState(handle)

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame],
                        timerValues: TimerValues) -> Iterator[pd.DataFrame]:
        shard = int(key[0])
        watermark = timerValues.getCurrentWatermarkInMs()
        columns = input_columns(rows)
        with shard_host(self.state_id, shard, self.spec) as host:
            head, version = self._load(host)
            out, changes, wanted = host.call("evaluate", version, shard, columns, watermark,
                                             int(time.time() * 1000))
            self._commit(host, head, changes, wanted, watermark)
        yield to_frame(out, OUTPUT_SCHEMA)

    def handleExpiredTimer(self, key: Any, timerValues: TimerValues, expiredTimerInfo: Any
                           ) -> Iterator[pd.DataFrame]:
        watermark = timerValues.getCurrentWatermarkInMs()
        with shard_host(self.state_id, int(key[0]), self.spec) as host:
            head, version = self._load(host)
            changes, wanted = host.call("cleanup", version, watermark)
            self._commit(host, head, changes, wanted, watermark)
        return iter(())

    def close(self) -> None:
        pass

    def _load(self, host: ShardHostConnection) -> tuple[Head | None, Version]:
        """Make the host's copy the stored state; the stored head and its version."""
        head = self.state.head()
        load = self.state.load_plan(head, host.call("version"))
        host.call("load", load)
        return head, load.target

    def _commit(self, host: ShardHostConnection, head: Head | None, changes: bytes,
                wanted: int | None, watermark_ms: int) -> None:
        """Write the batch's changes (and a snapshot when due), tag the host's copy with the
        version written, and move the shard's timer to the engine's next clean-up."""
        version = self.state.commit_changes(head, changes, lambda: host.call("snapshot"))
        host.call("tag", version)
        keep_one_timer(self.handle, self.handle.listTimers(), wanted, watermark_ms)
