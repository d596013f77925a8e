"""fraud_rules with `fraud.state: driver`: one long-lived engine in the micro-batch sink.

The transformWithState path pays a socket round trip to the JVM for every state read and write
(dozens per transaction) and a RocksDB commit per batch, which bound its throughput and its
batch cycle far below the engine's own speed. Here the query is stateless (source, event-time
watermark, foreachBatch) and the engine keeps its state in the driver's memory between batches,
running at its full speed on one core (numbers in BENCHMARKS.md, issue 5). Durability comes
from the query's checkpoint: each batch's state changes are written there (engine_state_files)
before the batch's `fraud_alerts` commit, with a snapshot every `fraud.snapshot_every`
committed batches (taken in a forked child: background_snapshots); a restarted job rebuilds
the state of the last committed batch and Spark replays the next one.
The trade-off: state must fit in the driver's memory, and evaluation does not scale out.
Outputs, ordering and exactly-once are the same as the sharded path's (same engine, same
arrival order, the same watermark from the offset log, the same sink), and so is hostile input
(CONTRACTS section 9): a transaction too far ahead of its Kafka time (FUTURE_COLUMN) is a
`future` dead letter that never reaches the engine, every message goes through the engine
isolated (fraud.core.isolation), and an alert the topic refuses becomes a dead letter.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import pyarrow as pa
from pyspark.sql import DataFrame

from spark_jobs.contracts.topics import TOPIC_FRAUD_ALERTS
from spark_jobs.fraud.core.changelog import LoggedStore
from spark_jobs.fraud.core.engine import FraudEngine
from spark_jobs.fraud.core.output_rows import (
    ARROW_OUTPUT_SCHEMA,
    arrival_order,
    output_fields,
)
from spark_jobs.fraud.jobs.alerts_sink import NAME, FraudAlertsSink, alert_key, refused_row
from spark_jobs.fraud.jobs.background_snapshots import BackgroundSnapshots
from spark_jobs.fraud.jobs.engine_state_files import EngineStateFiles
from spark_jobs.fraud.jobs.publishing import RefusingPublisher
from spark_jobs.fraud.processors.resident import raise_young_threshold, settle_garbage_collector
from spark_jobs.fraud.processors.shard_processor import apply_message
from spark_jobs.settings import Settings
from spark_jobs.streaming.checkpoint import batch_watermark_ms
from spark_jobs.streaming.drops import note_batch
from spark_jobs.streaming.event_time import FUTURE_COLUMN
from spark_jobs.streaming.kafka.replay_fence import key_only

DRIVER_SHARD = 0


class InputRow(NamedTuple):
    kind: str
    value: bytes | None
    kafka_topic: str
    kafka_partition: int
    kafka_offset: int
    kafka_timestamp: int
    kafka_key: str | None
    future_by_ms: int | None = None  # FUTURE_COLUMN: how far ahead of its Kafka time


assert InputRow._fields[-1] == FUTURE_COLUMN


class FraudDriverSink(FraudAlertsSink):
    """foreachBatch: the batch's rules and transactions through the driver's engine, then the
    outputs as the sharded path publishes them."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.checkpoint = settings.lake.checkpoint(NAME)
        self._files: EngineStateFiles | None = None
        self._snapshots: BackgroundSnapshots | None = None
        self._engine: FraudEngine | None = None
        self._store: LoggedStore | None = None
        self._applied: int | None = None  # the batch the in-memory state is the state after
        self._snapshot_of = -1
        self._cleanup_at: int | None = None
        self._sent_alerts: RefusingPublisher | None = None  # of the batch being delivered
        self._changes = b""  # its state changes, persisted just before its commit

    @property
    def files(self) -> EngineStateFiles:
        if self._files is None:
            self._files = EngineStateFiles(self.checkpoint)
        return self._files

    @property
    def snapshots(self) -> BackgroundSnapshots:
        if self._snapshots is None:
            self._snapshots = BackgroundSnapshots(self.files)
        return self._snapshots

    def _state_after(self, batch_id: int) -> FraudEngine:
        """The engine as it was after `batch_id` (-1: empty): kept in memory from batch to
        batch, rebuilt from the files after a restart or a replay."""
        if self._applied != batch_id or self._engine is None:
            snapshot, changes, base = self.files.state_after(batch_id)
            store = LoggedStore.restore(snapshot)
            for change in changes:
                store.apply_changes(change)
            fraud = self.settings.fraud
            raise_young_threshold()
            self._store = store
            self._engine = FraudEngine(store, fraud.alert_on_late_events, fraud.bucket_ms,
                                       late_retention_ms=fraud.late_retention_ms,
                                       max_message_bytes=self.settings.jobs.max_message_bytes)
            self._applied, self._snapshot_of = batch_id, -1 if base is None else base
            self._cleanup_at = None
        return self._engine

    def _maybe_snapshot(self, committed: int) -> None:
        """Replace the change files up to `committed` (a batch Spark has committed) by a
        snapshot, every `fraud.snapshot_every` batches, written in the background."""
        snapshots = self.snapshots
        if snapshots.poll() is not None or snapshots.in_flight is not None:
            return
        if committed - self._snapshot_of >= self.settings.fraud.snapshot_every:
            assert self._store is not None
            snapshots.start(committed, self._store.snapshot)
            self._snapshot_of = committed  # a failed one is retried snapshot_every later

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        table = batch.toArrow()
        # Only the first batch of a process can be a replay (a failed batch ends the query),
        # so the table's log is read for it alone, not on every batch of the hot path.
        continuing = self._applied == batch_id - 1 and self._engine is not None
        if not continuing and self.outputs.committed(self.marker, batch_id):
            self._state_after(batch_id)  # its change file was written before that commit
            return
        engine = self._state_after(batch_id - 1)
        if batch_id > 0:
            self._maybe_snapshot(batch_id - 1)  # Spark commits a batch before the next one
        watermark = batch_watermark_ms(self.checkpoint, batch_id)
        self.fence.begin(batch_id)
        alerts = RefusingPublisher(self.outputs.producer, TOPIC_FRAUD_ALERTS, self.fence, key_only)
        outputs = self.evaluate(engine, table, watermark, alerts)
        note_batch(self.outputs.job, batch_id, self.drop_counts(outputs))
        assert self._store is not None
        self._sent_alerts, self._changes = alerts, self._store.take_changes()
        self._applied = None  # until the change file is written, memory is ahead of disk
        self.deliver(outputs, batch_id)
        settle_garbage_collector(batch_id)

    def publish_alerts(self, alerts: pa.Table) -> None:
        """The alerts went out as they were found (in this order): await their delivery."""
        assert self._sent_alerts is not None
        self.set_aside(TOPIC_FRAUD_ALERTS, alerts, self._sent_alerts.flush())

    def commit(self, table: pa.Table, batch_id: int) -> None:
        """The batch's state changes first: once `fraud_alerts` says the batch is done, a
        restart rebuilds the state after it from the files."""
        self.files.write_changes(batch_id, self._changes)
        self._applied = batch_id
        super().commit(table, batch_id)

    def close(self) -> None:
        """Let a snapshot in flight finish (and publish it) before the job ends."""
        if self._snapshots is not None:
            self._snapshots.close()
        super().close()

    def evaluate(self, engine: FraudEngine, table: pa.Table, watermark: int,
                 alerts: RefusingPublisher | None = None) -> pa.Table:
        """Apply the batch's rows in arrival order, run the clean-up when its timer would
        fire, and return the outputs in the sharded path's row shape. Alerts also go to
        `alerts` the moment they are found, not after the whole batch."""
        now_ms = int(time.time() * 1000)
        found: list[dict[str, Any]] = []
        for row in input_rows_of(table):
            for output in apply_message(engine, row, watermark, now_ms):
                found.append(output_fields(DRIVER_SHARD, output, row))
                if alerts is not None and output.kind == "alert":
                    last = found[-1]
                    error = alerts.send(alert_key(last["rule_id"], last["transaction_id"]),
                                        output.value, (row.kafka_topic, row.kafka_partition,
                                                       row.kafka_offset, last["rule_id"]))
                    if error is not None:
                        found[-1] = refused_row(last, TOPIC_FRAUD_ALERTS, error)
        if self._cleanup_at is not None and watermark >= self._cleanup_at:
            engine.cleanup(watermark)
        self._cleanup_at = engine.next_cleanup_ms(watermark)
        return pa.Table.from_pylist(found, schema=ARROW_OUTPUT_SCHEMA)


def input_rows_of(table: pa.Table) -> list[InputRow]:
    """A batch's rows in arrival order (a table without FUTURE_COLUMN: none from the future)."""
    absent = [None] * table.num_rows
    columns = (table[name].to_pylist() if name in table.column_names else absent
               for name in InputRow._fields)
    return sorted((InputRow(*r) for r in zip(*columns, strict=True)), key=arrival_order)
