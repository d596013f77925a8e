"""The spark mode's shard hosts (processors/shard_host.py, shard_host_client.py), driven as
the shard processor drives them, over a dict-backed Spark state and real host processes:
a copy that stays the stored version, one left ahead by a failed batch, one brought forward,
one start for many workers, and no host outliving the process it lives for."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from spark_jobs.fraud.core.changelog import LoggedStore
from spark_jobs.fraud.core.engine import FraudEngine
from spark_jobs.fraud.core.output_rows import KIND_RULE, KIND_TRANSACTION
from spark_jobs.fraud.processors import shard_host_client
from spark_jobs.fraud.processors.shard_host import INPUT_FIELDS, EngineSpec
from spark_jobs.fraud.processors.shard_host_client import ShardHostError, shard_host
from spark_jobs.fraud.processors.shard_state import ShardState, apply_load
from spark_jobs.fraud.traffic import TransactionSpec, benchmark_rules, generate_transactions
from spark_jobs.fraud.traffic.generate import transaction_text
from tests.fraud.test_fraud_shard_state import Handle

START_MS = 1_795_000_000_000
SPEC = EngineSpec(alert_on_late=False, bucket_ms=0, late_retention_ms=3_600_000,
                  max_message_bytes=1 << 20)
WATERMARK = -(2**62)


@pytest.fixture
def anchor() -> Any:
    """A process for the hosts to live for, ended by the test (or at its end)."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield process
    process.kill()
    process.wait()


def columns_of(rows: list[tuple[Any, ...]]) -> list[list[Any]]:
    return [list(column) for column in zip(*rows, strict=True)] if rows else \
        [[] for _ in INPUT_FIELDS]


def rule_rows() -> list[tuple[Any, ...]]:
    return [(KIND_RULE, text.encode(), "rules", 0, offset, START_MS - 1000, None, None)
            for offset, text in enumerate(benchmark_rules())]


def transaction_batches(n: int, size: int) -> list[list[tuple[Any, ...]]]:
    rows = [(KIND_TRANSACTION, transaction_text(t), "transactions", 0, offset,
             START_MS + offset, None, None)
            for offset, t in enumerate(generate_transactions(TransactionSpec(), n * size,
                                                             START_MS, 200.0))]
    return [rows[i:i + size] for i in range(0, len(rows), size)]


def run_batch(state: ShardState, state_id: str, anchor_pid: int, rows: list[tuple[Any, ...]],
              commit: bool = True) -> list[tuple[Any, ...]]:
    """One batch as FraudShardProcessor.handleInputRows runs it (its timer aside)."""
    with shard_host(state_id, 0, SPEC, anchor_pid) as host:
        head = state.head()
        host.call("load", state.load_plan(head, host.call("version")))
        out, changes, _ = host.call("evaluate", 0, columns_of(rows), WATERMARK, 7)
        if commit:
            version = state.commit_changes(head, changes, lambda: host.call("snapshot"))
            host.call("tag", version)
    return out


def stats(state_id: str, anchor_pid: int) -> dict[str, int]:
    with shard_host(state_id, 0, SPEC, anchor_pid) as host:
        return host.call("stats")


def run_engine(engine: FraudEngine, rows: list[tuple[Any, ...]], rules: bool = False
               ) -> list[Any]:
    """The rows through a plain engine (the rules first if asked); its alerts."""
    if rules:
        for _, value, *_rest in rule_rows():
            engine.on_rule(value, START_MS - 1000)
    return [(output.data["ruleId"], output.data["groupingKey"])
            for _, value, *_rest in rows
            for output in engine.on_transaction(value, WATERMARK, 7)
            if output.kind == "alert"]


def engine_alerts(batches: list[list[tuple[Any, ...]]]) -> list[Any]:
    return run_engine(FraudEngine(LoggedStore()), [r for b in batches for r in b], rules=True)


def alerts_of(outputs: list[tuple[Any, ...]]) -> list[Any]:
    return [(row[3], row[4]) for row in outputs if row[0] == "alert"]


def test_a_host_keeps_the_stored_version_and_rebuilds_a_copy_left_ahead(anchor, tmp_path):
    state, state_id = ShardState(Handle()), str(tmp_path / "checkpoint")
    batches = transaction_batches(4, 300)
    outputs = run_batch(state, state_id, anchor.pid, rule_rows())
    outputs += run_batch(state, state_id, anchor.pid, batches[0])
    outputs += run_batch(state, state_id, anchor.pid, batches[1])
    assert stats(state_id, anchor.pid) == {"hits": 2, "caught_up": 0, "rebuilt": 1,
                                           "batches": 3}
    # evaluated, never committed (the task failed after it): the batch is evaluated again
    run_batch(state, state_id, anchor.pid, batches[2], commit=False)
    outputs += run_batch(state, state_id, anchor.pid, batches[2])
    outputs += run_batch(state, state_id, anchor.pid, batches[3])
    assert stats(state_id, anchor.pid)["rebuilt"] == 2
    assert alerts_of(outputs) == engine_alerts(batches)
    assert alerts_of(outputs)  # the traffic makes the rules fire


def test_a_copy_behind_is_brought_forward_with_the_logs(anchor, tmp_path):
    handle = Handle()
    state, state_id = ShardState(handle), str(tmp_path / "checkpoint")
    batches = transaction_batches(3, 200)
    run_batch(state, state_id, anchor.pid, rule_rows())
    run_batch(state, state_id, anchor.pid, batches[0])
    # the next batch ran on another executor: written to the state without this host
    head = state.head()
    other, _ = apply_load(state.load_plan(head, None), None)
    run_engine(FraudEngine(other), batches[1])
    state.commit(head, other)
    outputs = run_batch(state, state_id, anchor.pid, batches[2])
    assert stats(state_id, anchor.pid)["caught_up"] == 1
    assert alerts_of(outputs) == engine_alerts(batches)[len(engine_alerts(batches[:2])):]
    reference = FraudEngine(LoggedStore())
    run_engine(reference, [row for batch in batches for row in batch], rules=True)
    with shard_host(state_id, 0, SPEC, anchor.pid) as host:
        assert pickle.loads(host.call("snapshot")) == pickle.loads(reference.store.snapshot())


def test_many_workers_start_one_host_and_it_ends_with_its_anchor(anchor, tmp_path):
    state_id = str(tmp_path / "checkpoint")
    started = len(shard_host_client._STARTED)
    versions: list[Any] = []

    def connect() -> None:
        with shard_host(state_id, 0, SPEC, anchor.pid) as host:
            versions.append(host.call("version"))

    threads = [threading.Thread(target=connect) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert versions == [None] * 4
    assert len(shard_host_client._STARTED) == started + 1
    process = shard_host_client._STARTED[-1]
    path = Path(shard_host_client.host_path(state_id, 0, anchor.pid))
    assert path.exists()
    anchor.kill()
    anchor.wait()
    process.wait(timeout=10)  # the host looks for its anchor every second
    assert not path.exists()


def test_a_failed_call_says_why_and_the_host_goes_on(anchor, tmp_path):
    state_id = str(tmp_path / "checkpoint")
    with shard_host(state_id, 0, SPEC, anchor.pid) as host:
        with pytest.raises(ShardHostError, match="before its state was loaded"):
            host.call("evaluate", 0, columns_of([]), WATERMARK, 7)
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


def test_a_host_that_cannot_start_says_so(monkeypatch, anchor, tmp_path):
    monkeypatch.setattr(shard_host_client.sys, "executable", "/bin/false")
    with pytest.raises(ShardHostError, match=r"did not start \(exit code 1"), \
            shard_host(str(tmp_path / "c"), 0, SPEC, anchor.pid):
        pass
