"""A shard's engine state in Spark state: a snapshot and the change logs written after it.

Every Python state call is a socket round trip to the JVM, so the shard's windows, seen ids
and meta values are not kept one per state entry: the engine runs over a `LoggedStore`
(fraud.core.changelog, as in the driver mode) that lives on in the shard's host process on
the executor between micro-batches (shard_host.py), and each batch writes only what it
changed:

- `head` (ValueState): the state's version `(seq, nonce)`, the version of the snapshot, and the
  bytes of change logs written since that snapshot;
- `snapshot` (ValueState): `LoggedStore.snapshot()` at its version;
- `changes` (MapState seq -> (nonce, log)): `take_changes()` of every batch since the
  snapshot, and of the KEPT_LOGS batches before it.

A batch costs one `head` read, one change write and one `head` write. Once the logs since the
snapshot outweigh it (LOGS_OUTWEIGH_SNAPSHOT times), the batch also writes a new snapshot and
drops the older logs, so rebuilding a shard reads at most about twice its size.

The nonce (random per write) names one exact state: a host's copy is used only if it is the
stored version, and is brought forward with the logs after it when it is an older version of
the same history (the shard ran on another executor meanwhile); a batch Spark discarded (a
failed task, a restart from an older checkpoint) leaves a copy whose nonce is no longer
stored, which is then rebuilt from the snapshot.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql.streaming.stateful_processor import StatefulProcessorHandle
from pyspark.sql.types import BinaryType, LongType, StructField, StructType

from spark_jobs.fraud.core.changelog import LoggedStore
from spark_jobs.fraud.processors.shard_load import (
    EMPTY,
    EMPTY_LOAD,
    LOGS,
    OWN,
    REBUILD,
    Load,
    Version,
)

HEAD = StructType([StructField("seq", LongType()), StructField("nonce", LongType()),
                   StructField("snapshot_seq", LongType()),
                   StructField("change_bytes", LongType()),
                   StructField("snapshot_bytes", LongType()),
                   StructField("first_log", LongType())])
SNAPSHOT = StructType([StructField("seq", LongType()), StructField("nonce", LongType()),
                       StructField("blob", BinaryType())])
CHANGE_KEY = StructType([StructField("seq", LongType())])
CHANGE = StructType([StructField("nonce", LongType()), StructField("blob", BinaryType())])
MIN_SNAPSHOT_BYTES = 1 << 20  # below this, a snapshot is cheaper than keeping the logs
KEPT_LOGS = 8  # logs kept from before a snapshot: a copy that far behind is brought forward
# a new snapshot once the logs since the last outweigh it this often; 4 (fewer snapshots,
# slower rebuilds) made no measurable difference to the spark mode's throughput (BENCHMARKS.md)
LOGS_OUTWEIGH_SNAPSHOT = 1


@dataclass(frozen=True)
class Head:
    seq: int
    nonce: int
    snapshot_seq: int
    change_bytes: int
    snapshot_bytes: int
    first_log: int  # the oldest change log stored

    @property
    def version(self) -> Version:
        return (self.seq, self.nonce)


class ShardState:
    """The state variables of the current shard key (handle bound to it by Spark)."""

    def __init__(self, handle: StatefulProcessorHandle) -> None:
        self._head = handle.getValueState("head", HEAD)
        self._snapshot = handle.getValueState("snapshot", SNAPSHOT)
        self._changes = handle.getMapState("changes", CHANGE_KEY, CHANGE)

    def head(self) -> Head | None:
        stored = self._head.get()
        return None if stored is None else Head(*(int(v) for v in stored))

    def load_plan(self, head: Head | None, copy_version: Version | None) -> Load:
        """What a copy at `copy_version` (None: no copy, or one of unknown version) needs to
        become the state at `head`: nothing, the change logs after it, or a rebuild from the
        snapshot and the logs after that."""
        if head is None:
            return Load(EMPTY_LOAD, EMPTY)
        if copy_version is not None and copy_version == head.version:
            return Load(OWN, head.version)
        if copy_version is not None:
            seq = copy_version[0]
            if head.first_log <= seq < head.seq and self._change(seq)[0] == copy_version[1]:
                return Load(LOGS, head.version, None,
                            [self._change(later)[1] for later in range(seq + 1, head.seq + 1)])
        snapshot = self._snapshot.get()
        return Load(REBUILD, head.version, None if snapshot is None else bytes(snapshot[2]),
                    [self._change(later)[1]
                     for later in range(head.snapshot_seq + 1, head.seq + 1)])

    def _change(self, seq: int) -> tuple[int, bytes]:
        stored = self._changes.getValue((seq,))
        if stored is None:
            raise RuntimeError(f"fraud shard state: change log {seq} is missing")
        return int(stored[0]), bytes(stored[1])

    def commit(self, head: Head | None, store: LoggedStore) -> Version:
        """Persist what the batch changed in `store` (the store at `head`); the new version."""
        return self.commit_changes(head, store.take_changes(), store.snapshot)

    def commit_changes(self, head: Head | None, changes: bytes,
                       snapshot: Callable[[], bytes]) -> Version:
        """Persist a batch's `changes` to the state at `head`, and `snapshot()` of the state
        after them when the logs since the last snapshot outweigh it; the new version."""
        seq = 1 if head is None else head.seq + 1
        nonce = secrets.randbits(62) + 1
        change_bytes = len(changes) + (0 if head is None else head.change_bytes)
        self._changes.updateValue((seq,), (nonce, changes))
        if head is None:
            new = Head(seq, nonce, 0, change_bytes, 0, seq)
        elif change_bytes > max(LOGS_OUTWEIGH_SNAPSHOT * head.snapshot_bytes, MIN_SNAPSHOT_BYTES):
            # the logs before it are no longer needed to rebuild: keep the last few, for
            # copies a few versions behind
            blob = snapshot()
            self._snapshot.update((seq, nonce, blob))
            first_log = max(head.first_log, seq - KEPT_LOGS + 1)
            for old in range(head.first_log, first_log):
                self._changes.removeKey((old,))
            new = Head(seq, nonce, seq, 0, len(blob), first_log)
        else:
            new = Head(seq, nonce, head.snapshot_seq, change_bytes, head.snapshot_bytes,
                       head.first_log)
        self._head.update((new.seq, new.nonce, new.snapshot_seq, new.change_bytes,
                           new.snapshot_bytes, new.first_log))
        return new.version


@dataclass(frozen=True)
class StoredShard:
    """A shard's state as read back offline: where it lives, its size, its store rebuilt."""

    partition: int
    head: Head
    snapshot_bytes: int
    change_logs: int
    change_bytes: int
    store: LoggedStore


def read_shards(spark: Any, checkpoint: str) -> dict[int, StoredShard]:
    """Every shard's state in a fraud_rules checkpoint, read with Spark's state data source
    (for benchmarks and tests: what the job stores, and the engine state it rebuilds)."""

    def read(name: str) -> Any:
        return (spark.read.format("statestore").option("path", checkpoint)
                .option("stateVarName", name).load())

    heads = read("head").select("key.shard", "partition_id", "value.*").collect()
    snapshots = {r.shard: r for r in read("snapshot").select("key.shard", "value.*").collect()}
    changes: dict[int, dict[int, bytes]] = {}
    for r in read("changes").selectExpr("key.shard AS shard", "user_map_key.seq AS seq",
                                        "user_map_value.blob AS blob").collect():
        changes.setdefault(r.shard, {})[r.seq] = bytes(r.blob)
    found = {}
    for row in heads:
        head = Head(row.seq, row.nonce, row.snapshot_seq, row.change_bytes, row.snapshot_bytes,
                    row.first_log)
        snapshot = snapshots.get(row.shard)
        logs = changes.get(row.shard, {})
        store = LoggedStore.restore(None if snapshot is None else bytes(snapshot.blob))
        for seq in range(head.snapshot_seq + 1, head.seq + 1):
            store.apply_changes(logs[seq])
        found[int(row.shard)] = StoredShard(
            row.partition_id, head, 0 if snapshot is None else len(snapshot.blob), len(logs),
            sum(len(b) for b in logs.values()), store)
    return found
