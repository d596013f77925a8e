"""A shard's state in Spark state (processors/shard_state.py), over a dict-backed handle:
when snapshots are written, which logs are dropped, and that every way of loading a shard
(its own copy, a copy brought forward, a rebuild) gives the same store."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from spark_jobs.fraud.core.changelog import LoggedStore
from spark_jobs.fraud.core.engine import FraudEngine
from spark_jobs.fraud.processors import shard_state
from spark_jobs.fraud.processors.shard_load import apply_load
from spark_jobs.fraud.processors.shard_state import ShardState
from spark_jobs.fraud.traffic import TransactionSpec, benchmark_rules, generate_transactions
from spark_jobs.fraud.traffic.generate import transaction_text

START_MS = 1_795_000_000_000


class Value:
    def __init__(self) -> None:
        self.value: Any = None

    def get(self) -> Any:
        return self.value

    def update(self, value: Any) -> None:
        self.value = value


class Map:
    """A MapState (Spark's method names)."""

    def __init__(self) -> None:
        self.entries: dict[Any, Any] = {}

    def getValue(self, key: Any) -> Any:
        return self.entries.get(key)

    def updateValue(self, key: Any, value: Any) -> None:
        self.entries[key] = value

    def removeKey(self, key: Any) -> None:
        del self.entries[key]


class Handle:
    """What ShardState asks of Spark's StatefulProcessorHandle, kept in dicts."""

    def __init__(self) -> None:
        self.values: dict[str, Value] = {}
        self.maps: dict[str, Map] = {}

    def getValueState(self, name: str, schema: Any) -> Value:
        return self.values.setdefault(name, Value())

    def getMapState(self, name: str, key: Any, value: Any) -> Map:
        return self.maps.setdefault(name, Map())


def batches(n: int, size: int) -> list[list[bytes]]:
    texts = [transaction_text(t) for t in
             generate_transactions(TransactionSpec(), n * size, START_MS, 200.0)]
    return [texts[i:i + size] for i in range(0, len(texts), size)]


def content(store: LoggedStore) -> Any:
    """What a store holds, as plain values (snapshot bytes differ with pickle's memo)."""
    return pickle.loads(store.snapshot())


def run(engine: FraudEngine, batch: list[bytes]) -> None:
    for text in batch:
        engine.on_transaction(text, -(2**62), 0)


@pytest.fixture
def small_snapshots(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shard_state, "MIN_SNAPSHOT_BYTES", 1)


def test_a_snapshot_comes_once_the_logs_outweigh_it_and_every_load_agrees(small_snapshots):
    handle = Handle()
    state = ShardState(handle)
    store = LoggedStore()
    engine = FraudEngine(store)
    for text in benchmark_rules():
        engine.on_rule(text.encode() if isinstance(text, str) else text, START_MS - 1000)
    heads, versions, snapshot_due = [], [], []
    for batch in batches(14, 40):
        before = state.head()
        run(engine, batch)
        versions.append((state.commit(before, store), store.snapshot(), content(store)))
        after = state.head()
        log_bytes = len(handle.maps["changes"].entries[(after.seq,)][1])
        if before is not None:
            outweighed = before.change_bytes + log_bytes > max(
                shard_state.LOGS_OUTWEIGH_SNAPSHOT * before.snapshot_bytes, 1)
            snapshot_due.append((outweighed, after.snapshot_seq == after.seq))
        heads.append(after)
    assert all(due == taken for due, taken in snapshot_due)
    assert sum(taken for _, taken in snapshot_due) >= 2
    last = state.head()
    kept = sorted(seq for (seq,) in handle.maps["changes"].entries)
    assert kept == list(range(last.first_log, last.seq + 1))
    assert last.first_log >= last.snapshot_seq - shard_state.KEPT_LOGS + 1
    assert last.snapshot_seq < last.seq  # a rebuild applies logs after the snapshot
    expected = versions[-1][2]
    rebuilt, put = apply_load(state.load_plan(last, None), None)
    assert put is None and content(rebuilt) == expected
    own, put = apply_load(state.load_plan(last, last.version), store)
    assert own is store and put == set()
    old_version, old_bytes, old_content = versions[-3]
    assert old_content != expected
    behind = LoggedStore.restore(old_bytes)
    forward, put = apply_load(state.load_plan(last, old_version), behind)
    assert forward is behind and put and content(forward) == expected
    stale = state.load_plan(last, (old_version[0], 12345))  # not this history: rebuilt
    assert stale.kind == "rebuild" and stale.target == last.version
    rebuilt, put = apply_load(stale, LoggedStore.restore(old_bytes))
    assert put is None and content(rebuilt) == expected
