"""The spark mode's shard hosts (processors/shard_host.py, shard_host_client.py), driven by
the real FraudShardProcessor over a dict-backed Spark state and real host processes: a copy
that stays the stored version; one left ahead by a failed batch, changed by an abandoned
load, or tagged with a commit Spark lost, each rebuilt; one brought forward from another
executor's logs; one start for many workers; and no host outliving what it lives for."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import psutil
import pytest

from spark_jobs.fraud.core.changelog import LoggedStore
from spark_jobs.fraud.core.engine import FraudEngine
from spark_jobs.fraud.core.output_rows import KIND_RULE, KIND_TRANSACTION
from spark_jobs.fraud.processors import shard_host, shard_host_client
from spark_jobs.fraud.processors.shard_host import INPUT_FIELDS, EngineSpec
from spark_jobs.fraud.processors.shard_host_client import ShardHostError
from spark_jobs.fraud.processors.shard_load import LOGS, Load, apply_load
from spark_jobs.fraud.processors.shard_processor import FraudShardProcessor
from spark_jobs.fraud.traffic import TransactionSpec, benchmark_rules, generate_transactions
from spark_jobs.fraud.traffic.generate import transaction_text
from tests.fraud.test_fraud_shard_state import Handle

START_MS = 1_795_000_000_000
RETENTION_MS = 3_600_000
SPEC = EngineSpec(alert_on_late=False, bucket_ms=0, late_retention_ms=RETENTION_MS,
                  max_message_bytes=1 << 20)
WATERMARK = -(2**62)


class TimerHandle(Handle):
    """Handle plus the timer calls the processor makes."""

    def __init__(self) -> None:
        super().__init__()
        self.timers: set[int] = set()

    def listTimers(self) -> list[int]:
        return sorted(self.timers)

    def registerTimer(self, at: int) -> None:
        self.timers.add(at)

    def deleteTimer(self, at: int) -> None:
        self.timers.discard(at)


class Timers:
    def getCurrentWatermarkInMs(self) -> int:
        return WATERMARK


@pytest.fixture
def anchor(monkeypatch) -> Any:
    """A process for the hosts to live for (as the executor's Python daemon is for the
    worker that starts them), ended by the test or at its end."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    monkeypatch.setattr(shard_host_client.os, "getppid", lambda: process.pid)
    yield process
    process.kill()
    process.wait()


@pytest.fixture
def processor(anchor, tmp_path) -> FraudShardProcessor:
    return processor_on(TimerHandle(), str(tmp_path / "checkpoint"))


def processor_on(handle: Handle, state_id: str) -> FraudShardProcessor:
    made = FraudShardProcessor(state_id, SPEC.alert_on_late, SPEC.bucket_ms, RETENTION_MS,
                               SPEC.max_message_bytes)
    made.init(handle)
    return made


def rule_rows() -> list[tuple[Any, ...]]:
    return [(KIND_RULE, text, "rules", 0, offset, START_MS - 1000, None, None)
            for offset, text in enumerate(benchmark_rules())]


def transaction_batches(n: int, size: int) -> list[list[tuple[Any, ...]]]:
    rows = [(KIND_TRANSACTION, transaction_text(t), "transactions", 0, offset,
             START_MS + offset, None, None)
            for offset, t in enumerate(generate_transactions(TransactionSpec(), n * size,
                                                             START_MS, 200.0))]
    return [rows[i:i + size] for i in range(0, len(rows), size)]


def run_batch(processor: FraudShardProcessor, rows: list[tuple[Any, ...]]) -> list[Any]:
    """One batch through the processor as Spark calls it; its alerts (rule, key)."""
    frame = pd.DataFrame(rows, columns=list(INPUT_FIELDS)).astype(
        {"kafka_timestamp": "int64", "future_by_ms": "Int64"})
    [out] = processor.handleInputRows((0,), iter([frame]), Timers())
    return [(int(r.rule_id), r.grouping_key) for r in out.itertuples() if r.kind == "alert"]


def run_engine(engine: FraudEngine, rows: list[tuple[Any, ...]], rules: bool = False
               ) -> list[Any]:
    """The rows through a plain engine (the rules first if asked); its alerts."""
    for _, value, *_rest in rule_rows() if rules else []:
        engine.on_rule(value, START_MS - 1000)
    return [(output.data["ruleId"], output.data["groupingKey"])
            for _, value, *_rest in rows
            for output in engine.on_transaction(value, WATERMARK, 7)
            if output.kind == "alert"]


def reference(batches: list[list[tuple[Any, ...]]]) -> FraudEngine:
    engine = FraudEngine(LoggedStore())
    run_engine(engine, [row for batch in batches for row in batch], rules=True)
    return engine


def held(processor: FraudShardProcessor) -> Any:
    """What the shard's host holds, as plain values."""
    with shard_host_client.shard_host(processor.state_id, 0, SPEC) as host:
        return pickle.loads(host.call("snapshot"))


def counts(processor: FraudShardProcessor) -> dict[str, int]:
    with shard_host_client.shard_host(processor.state_id, 0, SPEC) as host:
        return host.call("stats")


def failing(monkeypatch, target: Any, name: str) -> Callable[[], None]:
    """Make target.name raise once (a task dying there); returns the undo."""
    original = getattr(target, name)

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the task died here")

    monkeypatch.setattr(target, name, fail)
    return lambda: monkeypatch.setattr(target, name, original)


def test_a_host_keeps_the_stored_version_and_rebuilds_a_copy_left_ahead(processor,
                                                                        monkeypatch):
    batches = transaction_batches(4, 300)
    alerts = run_batch(processor, rule_rows())
    alerts += run_batch(processor, batches[0]) + run_batch(processor, batches[1])
    assert counts(processor) == {"hits": 2, "caught_up": 0, "rebuilt": 1, "batches": 3}
    # evaluated, never committed (the task died before its state write): evaluated again
    undo = failing(monkeypatch, processor.state, "commit_changes")
    with pytest.raises(RuntimeError, match="died"):
        run_batch(processor, batches[2])
    undo()
    alerts += run_batch(processor, batches[2]) + run_batch(processor, batches[3])
    assert counts(processor)["rebuilt"] == 2
    assert alerts and alerts == run_engine(FraudEngine(LoggedStore()),
                                           [r for b in batches for r in b], rules=True)
    assert held(processor) == pickle.loads(reference(batches).store.snapshot())


def test_a_commit_spark_lost_after_the_tag_is_rebuilt(processor):
    batches = transaction_batches(3, 200)
    run_batch(processor, rule_rows())
    run_batch(processor, batches[0])
    handle = processor.handle
    saved = {name: dict(state.entries) for name, state in handle.maps.items()}, \
        {name: state.value for name, state in handle.values.items()}
    run_batch(processor, batches[1])  # committed and tagged, then Spark's commit is lost
    maps, values = saved
    for name, entries in maps.items():
        handle.maps[name].entries = entries
    for name, value in values.items():
        handle.values[name].value = value
    alerts = run_batch(processor, batches[1]) + run_batch(processor, batches[2])
    assert counts(processor)["rebuilt"] == 2
    assert alerts == run_engine(reference(batches[:1]), batches[1] + batches[2])
    assert held(processor) == pickle.loads(reference(batches).store.snapshot())


def other_executor_runs(handle: Handle, state_id: str, batches: list[Any]) -> FraudEngine:
    """The shard's next batches on another executor: a live engine of its own, loaded from
    and committed to the same Spark state (its change logs are deltas of its windows)."""
    state = processor_on(handle, state_id).state
    head = state.head()
    store, _ = apply_load(state.load_plan(head, None), None)
    engine = FraudEngine(store)
    for batch in batches:
        run_engine(engine, batch)
        state.commit(head, store)
        head = state.head()
    return engine


def test_a_copy_behind_is_brought_forward_with_the_logs(processor):
    batches = transaction_batches(4, 200)
    run_batch(processor, rule_rows())
    run_batch(processor, batches[0])
    other_executor_runs(processor.handle, processor.state_id, batches[1:3])
    alerts = run_batch(processor, batches[3])
    assert counts(processor)["caught_up"] == 1
    assert alerts == run_engine(reference(batches[:3]), batches[3])
    assert held(processor) == pickle.loads(reference(batches).store.snapshot())


def test_a_rule_changed_on_another_executor_is_read_when_caught_up(processor):
    batches = transaction_batches(2, 300)
    run_batch(processor, rule_rows())
    run_batch(processor, batches[0])
    # another executor's batch held only a rule change: its log puts no window
    handle, state_id = processor.handle, processor.state_id
    state = processor_on(handle, state_id).state
    head = state.head()
    store, _ = apply_load(state.load_plan(head, None), None)
    engine = FraudEngine(store)
    engine.on_rule('{"ruleId": 1, "ruleState": "DELETE"}', START_MS + 1000)
    state.commit(head, store)
    alerts = run_batch(processor, batches[1])
    assert counts(processor)["caught_up"] == 1
    assert alerts == run_engine(engine, batches[1])
    assert all(rule != 1 for rule, _ in alerts)


def test_a_load_abandoned_or_failed_half_way_is_never_replayed(processor):
    batches = transaction_batches(5, 300)
    run_batch(processor, rule_rows())
    run_batch(processor, batches[0])
    other_executor_runs(processor.handle, processor.state_id, batches[1:3])
    # a task brings the copy forward with the logs, then dies before its batch
    with shard_host_client.shard_host(processor.state_id, 0, SPEC) as host:
        processor._load(host)
    alerts = run_batch(processor, batches[3])
    assert counts(processor) == {"hits": 2, "caught_up": 1, "rebuilt": 1, "batches": 3}
    # a replay that fails half way: the copy is changed, so its version is forgotten
    version = processor.state.head().version
    with shard_host_client.shard_host(processor.state_id, 0, SPEC) as host:
        good = processor.state.load_plan(processor.state.head(), (version[0] - 1, 1)).logs
        with pytest.raises(ShardHostError, match=r"UnpicklingError|pickle"):
            host.call("load", Load(LOGS, version, None, [*good, b"not a change log"]))
        assert host.call("version") is None
    alerts += run_batch(processor, batches[4])
    assert counts(processor)["rebuilt"] == 2
    assert alerts == run_engine(reference(batches[:3]), batches[3] + batches[4])
    assert held(processor) == pickle.loads(reference(batches).store.snapshot())


def test_a_batch_on_a_copy_loaded_for_another_head_is_refused(processor):
    run_batch(processor, rule_rows())
    with shard_host_client.shard_host(processor.state_id, 0, SPEC) as host:
        version = host.call("version")
        with pytest.raises(ShardHostError, match="load it first"):
            host.call("evaluate", (version[0] + 1, 5), 0, [[] for _ in INPUT_FIELDS],
                      WATERMARK, 7)
        assert host.call("version") == version  # refused before anything changed


def test_new_engine_settings_get_a_new_engine(processor):
    run_batch(processor, rule_rows())
    other = EngineSpec(True, 60_000, RETENTION_MS, SPEC.max_message_bytes)
    with shard_host_client.shard_host(processor.state_id, 0, other) as host:
        assert host.call("version") is None


def test_many_workers_start_one_host_and_it_ends_with_its_anchor(anchor, tmp_path):
    state_id = str(tmp_path / "checkpoint")
    before = set(map(id, shard_host_client._STARTED))
    versions: list[Any] = []

    def connect() -> None:
        with shard_host_client.shard_host(state_id, 0, SPEC) as host:
            versions.append(host.call("version"))

    threads = [threading.Thread(target=connect) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert versions == [None] * 4
    [process] = [p for p in shard_host_client._STARTED if id(p) not in before]
    path = Path(shard_host_client.host_path(state_id, 0, anchor.pid))
    assert path.exists()
    with shard_host_client.shard_host(state_id, 0, SPEC) as host:
        anchor.kill()  # also while a task holds the host
        anchor.wait()
        process.wait(timeout=30)  # it looks for its anchor every second
        with pytest.raises(ShardHostError, match="gone during version"):
            host.call("version")
    assert not path.exists()


def test_a_killed_hosts_socket_is_replaced_and_a_displaced_host_exits(anchor, tmp_path):
    state_id = str(tmp_path / "checkpoint")
    with shard_host_client.shard_host(state_id, 0, SPEC) as host:
        host.call("version")
    first = shard_host_client._STARTED[-1]
    path = Path(shard_host_client.host_path(state_id, 0, anchor.pid))
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert path.exists()  # left behind: nobody answers there
    with shard_host_client.shard_host(state_id, 0, SPEC) as host:
        assert host.call("version") is None
    second = shard_host_client._STARTED[-1]
    assert second.pid != first.pid and second.poll() is None
    # a third host takes the name over (its starter found nobody answering, say): the
    # second one sees that, exits and leaves the third one's socket file in place
    path.unlink()
    third = subprocess.Popen([sys.executable, "-c", shard_host_client.HOST_ENTRY, str(path),
                              str(anchor.pid)], stdout=subprocess.PIPE)
    assert third.stdout.readline() == b"ready\n"
    second.wait(timeout=30)
    assert path.exists()
    third.send_signal(signal.SIGTERM)
    third.wait(timeout=30)
    assert not path.exists()  # its own file, removed on SIGTERM


def test_an_idle_host_exits(anchor, tmp_path):
    path = str(tmp_path / "idle.sock")
    listening = shard_host.Listening(path)
    serving = threading.Thread(target=shard_host.serve,
                               args=(listening, psutil.Process(anchor.pid), 0.5))
    serving.start()
    serving.join(timeout=30)
    assert not serving.is_alive()
    listening.close()
    assert not os.path.exists(path)


def test_a_failed_call_says_why_and_the_host_goes_on(anchor, tmp_path):
    state_id = str(tmp_path / "checkpoint")
    with shard_host_client.shard_host(state_id, 0, SPEC) as host:
        with pytest.raises(ShardHostError, match="load it first"):
            host.call("evaluate", (0, 0), 0, [[] for _ in INPUT_FIELDS], WATERMARK, 7)
        with pytest.raises(ShardHostError, match="not a call"):
            host.call("__init__", SPEC)
        assert host.call("version") is None


def test_a_hosts_directory_others_can_enter_is_refused(monkeypatch, tmp_path):
    monkeypatch.setattr(shard_host_client.tempfile, "gettempdir", lambda: str(tmp_path))
    directory = tmp_path / f"tideline-fraud-shards-{os.getuid()}"
    directory.mkdir(mode=0o755)
    directory.chmod(0o755)
    with pytest.raises(ShardHostError, match="mode 0700"):
        shard_host_client.hosts_directory()
    directory.chmod(0o700)
    assert shard_host_client.hosts_directory() == directory
    deep = tmp_path / ("d" * 90)
    deep.mkdir()
    monkeypatch.setattr(shard_host_client.tempfile, "gettempdir", lambda: str(deep))
    with pytest.raises(ShardHostError, match="shorter directory"):
        shard_host_client.host_path("state", 0, 1)


def test_a_host_that_cannot_start_says_so(monkeypatch, anchor, tmp_path):
    monkeypatch.setattr(shard_host_client.sys, "executable", "/bin/false")
    with pytest.raises(ShardHostError, match=r"did not start \(exit code 1"), \
            shard_host_client.shard_host(str(tmp_path / "c"), 0, SPEC):
        pass
