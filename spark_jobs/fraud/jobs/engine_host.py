"""One engine of `fraud.state: driver` with its durable state: the rules of one shard.

The driver splits the rules over `fraud.shards` engines (fraud.core.rule_routing), each held
by an EngineHost in a process of its own (engine_process.py; a single shard in the driver's
own process), so that evaluation uses every core of the driver's machine. Every host
sees every transaction of the batch and applies, in arrival order, the rules messages its
shard owns. Its state is kept in memory from batch to batch and made durable in the query's
checkpoint: the batch's changes in one file per batch, written before the batch's outputs are
committed, and now and then a snapshot of a committed batch, taken in a forked child
(engine_state_files, background_snapshots). A restarted job rebuilds each host's state after
the last committed batch and Spark replays the next one.

When to snapshot follows the spark mode's rule (processors/shard_state.py): once the change
files since the last snapshot outweigh it, and at least MIN_SNAPSHOT_LOG_BYTES (the spark
mode's floor is 1 MB: there a snapshot is a state-store write, here a fork), so that a restart
reads about twice the state while snapshots succeed; or after `fraud.snapshot_every` batches, which
bounds the number of files. A count of batches alone snapshotted a slow stream's small state
every few seconds (every one a fork and a CPU burst, BENCHMARKS.md) and let a fast stream's
change files grow to gigabytes between two snapshots.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from spark_jobs.fraud.core.changelog import LoggedStore
from spark_jobs.fraud.core.engine import FraudEngine
from spark_jobs.fraud.core.isolation import apply_message
from spark_jobs.fraud.core.output_rows import KIND_RULE, output_table, output_values
from spark_jobs.fraud.core.rule_routing import for_shard
from spark_jobs.fraud.jobs.background_snapshots import BackgroundSnapshots
from spark_jobs.fraud.jobs.engine_state_files import EngineStateFiles
from spark_jobs.fraud.processors.resident import raise_young_threshold, rebuilding
from spark_jobs.streaming.future_rows import FUTURE_COLUMN

if TYPE_CHECKING:  # an engine process imports no more than evaluation needs (start-up)
    from spark_jobs.settings import Settings

# Called with the batch's output rows so far (output_values tuples) and the index of an alert
# just found: the driver publishes it at once (and may turn the row into a dead letter if the
# topic refuses it).
OnAlert = Callable[[list[tuple[Any, ...]], int], None]

DRIVER_SHARD = 0  # the shard of a single engine (the shadow recomputation's)
# change-file bytes a snapshot waits for at least: change files replay at ~21 MB/s on a 2-core
# machine (bench.fraud_restore), so a restart replays a small state's files in ~3 s at most
MIN_SNAPSHOT_LOG_BYTES = 64 << 20


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


def input_rows_of(table: pa.Table) -> list[InputRow]:
    """A batch's rows in arrival order (a table without FUTURE_COLUMN: none from the future).
    Sorted by Arrow, not by a key function per row: every shard does this for every row."""
    rule_last = pc.cast(pc.not_equal(table["kind"], KIND_RULE), pa.int8())
    order = pc.sort_indices(table.append_column(_KIND_RANK, rule_last), sort_keys=_ARRIVAL)
    ordered = table.take(order)
    absent = [None] * table.num_rows
    columns = [ordered[name].to_pylist() if name in table.column_names else absent
               for name in InputRow._fields]
    return list(map(InputRow._make, zip(*columns, strict=True)))


# output_rows.arrival_order, as Arrow sort keys (a rule before a transaction on ties)
_KIND_RANK = "_kind_rank"
# A message without a Kafka time (a broker that keeps none) comes first, as the shadow reads
# its time as -1 (streaming/kafka/topic_reader.py).
_ARRIVAL = [("kafka_timestamp", "ascending", "at_start"), (_KIND_RANK, "ascending"),
            ("kafka_topic", "ascending"), ("kafka_partition", "ascending"),
            ("kafka_offset", "ascending")]


@dataclass(frozen=True)
class HostSpec:
    """What a host needs to know (plain data: it is sent to a host's own process)."""

    checkpoint: str
    shard: int
    shards: int
    alert_on_late_events: bool
    bucket_ms: int
    late_retention_ms: int
    max_message_bytes: int
    snapshot_every: int

    @classmethod
    def of(cls, settings: Settings, checkpoint: str, shard: int) -> HostSpec:
        fraud = settings.fraud
        return cls(checkpoint, shard, fraud.shards, fraud.alert_on_late_events, fraud.bucket_ms,
                   fraud.late_retention_ms, settings.jobs.max_message_bytes,
                   fraud.snapshot_every)


def evaluate_batch(engine: FraudEngine, table: pa.Table, watermark: int,
                   cleanup_at: int | None = None, *, shard: int = 0, shards: int = 1,
                   on_alert: OnAlert | None = None, now_ms: int | None = None
                   ) -> tuple[pa.Table, int | None]:
    """Apply the batch's rows in arrival order (the rules messages shard `shard` of `shards`
    owns, every transaction), run the clean-up when its timer (`cleanup_at`) would fire, and
    return the outputs in the sharded path's row shape with the next clean-up time. Each
    alert also goes to `on_alert` the moment it is found, not after the whole batch."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    limit = engine.max_message_bytes  # the rule's owner is decided as the engine parses it
    found: list[tuple[Any, ...]] = []
    for row in input_rows_of(table):
        if shards > 1 and row.kind == KIND_RULE and not for_shard(row.value, shard, shards,
                                                                   limit):
            continue
        for output in apply_message(engine, row, watermark, now_ms):
            found.append(output_values(shard, output, row))
            if on_alert is not None and output.kind == "alert":
                on_alert(found, len(found) - 1)
    if cleanup_at is not None and watermark >= cleanup_at:
        engine.cleanup(watermark)
    return output_table(found), engine.next_cleanup_ms(watermark)


class EngineHost:
    """One shard's engine in this process, and its state files."""

    def __init__(self, spec: HostSpec) -> None:
        self.spec = spec
        self.files = EngineStateFiles(spec.checkpoint, spec.shard)
        if spec.shard == 0:
            self.files.pin_shards(spec.shards)
        self.files.discard_unfinished_snapshots()  # a killed job's; this process has none yet
        self.snapshots = BackgroundSnapshots(self.files)
        self.engine: FraudEngine | None = None
        self.store: LoggedStore | None = None
        self.applied: int | None = None  # the batch the in-memory state is the state after
        self._snapshot_of = -1
        self._change_bytes = 0  # of the change files written since (or since one in flight)
        self._cleanup_at: int | None = None
        self._changes = b""  # the last evaluated batch's, persisted just before its commit

    def restore(self, batch_id: int) -> None:
        """Make the state the state after `batch_id` (-1: empty): kept in memory from batch
        to batch, rebuilt from the files after a restart or a replay."""
        if self.applied == batch_id and self.engine is not None:
            return
        snapshot, changes, base = self.files.state_after(batch_id)
        with rebuilding():
            store = LoggedStore.restore(snapshot)
            for change in changes:
                store.apply_changes(change)
        spec = self.spec
        raise_young_threshold()
        self.store = store
        self.engine = FraudEngine(store, spec.alert_on_late_events, spec.bucket_ms,
                                  late_retention_ms=spec.late_retention_ms,
                                  max_message_bytes=spec.max_message_bytes)
        start = -1 if base is None else base  # changes[0] is batch start + 1's
        self.applied, self.snapshots.size = batch_id, 0 if snapshot is None else len(snapshot)
        # a snapshot still being written (a batch failed meanwhile) replaces the files up to
        # its batch once published: only the change files after it count towards the next
        in_flight = self.snapshots.in_flight
        self._snapshot_of = start if in_flight is None else max(start, in_flight)
        self._change_bytes = sum(len(change) for batch, change in enumerate(changes, start + 1)
                                 if batch > self._snapshot_of)
        self._cleanup_at = None

    def maybe_snapshot(self, committed: int) -> None:
        """Replace the change files up to `committed` (a batch Spark has committed) by a
        snapshot written in the background, when they call for one (snapshot_due)."""
        snapshots = self.snapshots
        if snapshots.poll() is not None or snapshots.in_flight is not None:
            return
        if self.applied != committed:  # memory is not the state after it: nothing to take
            return
        if self.snapshot_due(committed):
            assert self.store is not None
            snapshots.start(committed, self.store.snapshot)
            # a failed one is retried once as many batches or bytes have come again
            self._snapshot_of, self._change_bytes = committed, 0

    def snapshot_due(self, committed: int) -> bool:
        """Whether the change files since the last snapshot (up to `committed`) should give
        way to one: they outweigh it (and MIN_SNAPSHOT_LOG_BYTES), or they are
        `fraud.snapshot_every` batches."""
        if committed - self._snapshot_of >= self.spec.snapshot_every:
            return True
        return self._change_bytes >= max(MIN_SNAPSHOT_LOG_BYTES, self.snapshots.size)

    def evaluate(self, batch_id: int, table: pa.Table, watermark: int, now_ms: int,
                 on_alert: OnAlert | None = None) -> pa.Table:
        """The batch through the state after batch_id - 1; its changes are kept for
        write_changes, and memory is ahead of the files until then."""
        self.restore(batch_id - 1)
        assert self.engine is not None and self.store is not None
        self.applied = None  # ahead of the files from here on, also if evaluation fails
        outputs, self._cleanup_at = evaluate_batch(
            self.engine, table, watermark, self._cleanup_at, shard=self.spec.shard,
            shards=self.spec.shards, on_alert=on_alert, now_ms=now_ms)
        self._changes = self.store.take_changes()
        return outputs

    def write_changes(self, batch_id: int) -> None:
        """Persist the evaluated batch's changes: the state after batch_id is durable."""
        self.files.write_changes(batch_id, self._changes)
        self._change_bytes += len(self._changes)
        self.applied = batch_id

    def tidy(self) -> None:
        """Housekeeping for a moment when no batch waits on this host (after its changes
        are written): the files a published snapshot replaces are deleted."""
        self.snapshots.tidy()

    def close(self) -> None:
        """Let a snapshot in flight finish (and publish it)."""
        self.snapshots.close()
