"""An engine process never rescans its frozen windows (settle_engine_process_collector), which
is safe only because the engine makes no cyclic garbage that outlives a batch: checked here in
a fresh interpreter that runs an EngineHost as an engine process does, over benchmark traffic
with hostile messages, messages that fail inside the engine, rule changes, clean-ups,
snapshots, failed batches and engines rebuilt from the files (the old one dropped), then
unfreezes everything and counts what a full collection finds. Two controls show the count
finds a cycle that died after it was frozen, and an engine with a cycle dropped at a rebuild."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

ENGINE_PROCESS = r"""
import gc, json, sys, traceback
import pyarrow as pa
from helpers.hostile import hostile_messages
from spark_jobs.fraud.core.engine import FraudEngine
from spark_jobs.fraud.core.output_rows import KIND_RULE, KIND_TRANSACTION
from spark_jobs.fraud.jobs.engine_host import EngineHost, HostSpec, InputRow
from spark_jobs.fraud.jobs.engine_process import after_answer
from spark_jobs.fraud.traffic.benchmark_rules import BENCHMARK_RULES
from spark_jobs.fraud.traffic.generate import generate_transactions, transaction_text

checkpoint, mode = sys.argv[1], sys.argv[2]
on_transaction, made = FraudEngine.on_transaction, FraudEngine.__init__

def failing(engine, raw, *args):  # a message that fails inside the engine: an error row
    if raw is not None and b"FAIL" in raw:
        raise KeyError("fails inside the engine")
    return on_transaction(engine, raw, *args)

def with_cycle(engine, *args, **kwargs):  # the second control
    made(engine, *args, **kwargs)
    engine.itself = engine

FraudEngine.on_transaction = failing
if mode == "engine-cycle":
    FraudEngine.__init__ = with_cycle
START, MINUTE = 1_767_225_600_000, 60_000
transactions = list(generate_transactions(count=6_000, start_ms=START, rate_per_s=20.0))
hostile = [message for _, message, _ in hostile_messages(
    transactions[0], int_field="transactionId", string_field="paymentType",
    time_field="eventTime", number_field="paymentAmount", max_message_bytes=4096)]

def table(rows):
    columns = {name: [] for name in InputRow._fields}
    for offset, (kind, at, value) in enumerate(rows):
        topic = "rules" if kind == KIND_RULE else "transactions"
        for name, item in zip(InputRow._fields,
                              InputRow(kind, value, topic, 0, offset, at, None, None)):
            columns[name].append(item)
    return pa.table(columns)

def rule(number, **changes):
    return json.dumps({**BENCHMARK_RULES[number], **changes}).encode()

gc.collect()
gc.freeze()  # the imports, as an engine process's are frozen by its first batch
host = EngineHost(HostSpec(checkpoint, 0, 1, True, 0, 10 * MINUTE, 4096, 7))
host.restore(-1)
kept = []
for batch_id in range(60):
    chunk = transactions[batch_id * 100:(batch_id + 1) * 100]
    at = chunk[0]["eventTime"]
    rows = [(KIND_TRANSACTION, t["eventTime"], transaction_text(t)) for t in chunk]
    if batch_id == 0:
        rows[:0] = [(KIND_RULE, at - 1, rule(n)) for n in range(len(BENCHMARK_RULES))]
    if batch_id % 10 == 3:  # a rule changed, one removed, one that cannot be parsed
        rows += [(KIND_RULE, at, rule(1, limit=10)), (KIND_RULE, at, rule(4, ruleState="DELETE")),
                 (KIND_RULE, at, b"{not json")]
    rows += [(KIND_TRANSACTION, at, message) for message in hostile if batch_id % 5 == 0]
    rows.append((KIND_TRANSACTION, at, b'{"FAIL": 1}'))
    watermark = chunk[-1]["eventTime"] - 2 * MINUTE  # windows expire: clean-ups run
    if batch_id % 7 == 2:  # a failed batch, answered as serve() answers it, then a rebuild
        try:
            host.evaluate(batch_id, pa.table({"kind": ["a batch without its columns"]}), 0, 0)
        except Exception:
            traceback.format_exc(limit=8)
        host.restore(batch_id - 1)  # from the files: the engine before is dropped
    host.maybe_snapshot(batch_id - 1)  # as the driver calls them: the batch before committed
    host.evaluate(batch_id, table(rows), watermark, chunk[-1]["eventTime"])
    after_answer(host, "evaluate")
    host.write_changes(batch_id)
    after_answer(host, "write_changes")
    if mode == "planted" and batch_id == 10:  # a cycle that lives past its batch
        kept.append({})
        kept[0]["self"] = kept[0]
    if mode == "planted" and batch_id == 20:
        kept.clear()
host.close()
assert host.snapshots.size > 0, "a snapshot was taken"
assert host.engine.counters["errors"] > 0, "messages failed inside the engine"
gc.unfreeze()
print(gc.collect())
"""


def run_engine_process(tmp_path: Path, mode: str) -> int:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}
    done = subprocess.run([sys.executable, "-c", ENGINE_PROCESS, str(tmp_path), mode],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[-1])


def test_an_engine_process_leaves_no_cyclic_garbage_behind_its_frozen_objects(
        tmp_path: Path) -> None:
    assert run_engine_process(tmp_path, "engine") == 0


@pytest.mark.parametrize("control", ["planted", "engine-cycle"])
def test_the_check_finds_cycles_that_died_after_they_were_frozen(tmp_path: Path,
                                                                 control: str) -> None:
    assert run_engine_process(tmp_path, control) >= 1
