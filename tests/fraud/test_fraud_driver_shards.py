"""The driver's rules split over several engines (fraud.shards): each rule owned by one shard,
the same outputs as one engine, state files pinned to the split, engine processes that answer
and leave nothing behind."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterator
from functools import partial
from typing import Any

import pyarrow as pa
import pytest

from spark_jobs.contracts.topics import TOPIC_RULES, TOPIC_TRANSACTIONS
from spark_jobs.fraud.core.engine import FraudEngine, MemoryStore
from spark_jobs.fraud.core.output_rows import (
    ARROW_OUTPUT_SCHEMA,
    KIND_RULE,
    KIND_TRANSACTION,
    arrival_order,
)
from spark_jobs.fraud.core.rule_routing import EVERY_SHARD, owner_shard
from spark_jobs.fraud.jobs import fraud_driver
from spark_jobs.fraud.jobs.alerts_sink import NAME
from spark_jobs.fraud.jobs.engine_host import (
    EngineHost,
    HostSpec,
    InputRow,
    evaluate_batch,
    input_rows_of,
)
from spark_jobs.fraud.jobs.engine_process import EngineProcess, EngineProcessError
from spark_jobs.fraud.jobs.engine_state_files import EngineStateFiles, StateFilesError
from spark_jobs.fraud.jobs.fraud_driver import FraudDriverSink
from spark_jobs.fraud.jobs.publishing import RefusingPublisher
from spark_jobs.streaming.future_rows import FUTURE_COLUMN
from spark_jobs.streaming.kafka.producer import make_producer
from spark_jobs.streaming.kafka.topic_admin import ensure_topics
from spark_jobs.streaming.kafka.topic_reader import read_all

REFUSAL_LIMIT = 1_000  # the smallest message.max.bytes librdkafka accepts


def _rule(rule_id: Any, **extra: Any) -> bytes:
    return json.dumps({"ruleId": rule_id, "ruleState": "ACTIVE",
                       "groupingKeyNames": ["payeeId"], "aggregateFieldName": "paymentAmount",
                       "aggregatorFunctionType": "SUM", "limitOperatorType": ">", "limit": 50,
                       "windowMinutes": 5, **extra}).encode()


@pytest.mark.parametrize(("message", "owner"), [
    (_rule(7), 1),
    (_rule(8), 2),
    (json.dumps({"ruleId": 4, "ruleState": "DELETE"}).encode(), 1),
    (json.dumps({"ruleState": "CONTROL", "controlType": "EXPORT_RULES_CURRENT"}).encode(),
     EVERY_SHARD),
    (json.dumps({"ruleId": 5, "ruleState": "CONTROL", "controlType": "DELETE_RULES_ALL"})
     .encode(), EVERY_SHARD),
    (_rule("7"), EVERY_SHARD),  # the engine rejects it: every shard says so, the sink once
    (_rule(True), EVERY_SHARD),
    (_rule(7.0), EVERY_SHARD),
    (b"{not json", EVERY_SHARD),
    (None, EVERY_SHARD),
])
def test_a_rule_belongs_to_one_shard_and_the_rest_to_every_shard(message, owner):
    assert owner_shard(message, 3) == owner
    assert owner_shard(message, 1) == 0


def _traffic(seed: int) -> list[list[tuple[str, int, bytes]]]:
    """Random batches: rules added, changed, deleted, exported and cleared, invalid rules, and
    transactions (some redelivered, some malformed) over a few payees and beneficiaries."""
    rng = random.Random(seed)
    batches, clock, tid = [], 1_000_000, 0
    for _ in range(12):
        batch = []
        for _ in range(rng.randint(5, 40)):
            clock += rng.randint(0, 3_000)
            roll = rng.random()
            if roll < 0.08:
                message = _rule(rng.randint(1, 6), groupingKeyNames=rng.choice(
                    [["payeeId"], ["beneficiaryId"], ["payeeId", "beneficiaryId"]]),
                    limit=rng.randint(1, 200), aggregatorFunctionType=rng.choice(
                        ["SUM", "MAX", "MIN", "AVG"]), windowMinutes=rng.randint(1, 3))
                batch.append((KIND_RULE, clock, message))
            elif roll < 0.10:
                batch.append((KIND_RULE, clock, rng.choice([
                    json.dumps({"ruleId": rng.randint(1, 6), "ruleState": "DELETE"}).encode(),
                    json.dumps({"ruleState": "CONTROL",
                                "controlType": "EXPORT_RULES_CURRENT"}).encode(),
                    json.dumps({"ruleState": "CONTROL",
                                "controlType": "CLEAR_STATE_ALL"}).encode(),
                    _rule("x"), b"[1, 2"])))
            else:
                tid += 1
                if rng.random() < 0.03:
                    batch.append((KIND_TRANSACTION, clock, b'{"transactionId": '))
                    continue
                redelivered = rng.random() < 0.05 and tid > 1
                batch.append((KIND_TRANSACTION, clock, json.dumps({
                    "transactionId": rng.randint(1, tid - 1) if redelivered else tid,
                    "eventTime": clock - rng.randint(0, 2_000), "payeeId": rng.randint(1, 4),
                    "beneficiaryId": rng.randint(1, 3), "paymentAmount": rng.randint(1, 90),
                    "paymentType": "CSH"}).encode()))
        batches.append(batch)
    return batches


def _table(rows: list[tuple[str, int, bytes]], first_offset: int) -> pa.Table:
    made = [InputRow(kind, value, TOPIC_RULES if kind == KIND_RULE else TOPIC_TRANSACTIONS, 0,
                     first_offset + i, at, None) for i, (kind, at, value) in enumerate(rows)]
    return pa.table({name: [getattr(r, name) for r in made] for name in InputRow._fields})


def _outputs(shards: int, seed: int) -> Counter[tuple[Any, ...]]:
    """Every shard's outputs over the traffic, as the sink keeps them: alerts and exported
    rules of every shard, a message's other outputs once (the sink's _first_per_source)."""
    engines = [FraudEngine(MemoryStore(pickled=True)) for _ in range(shards)]
    cleanups: list[int | None] = [None] * shards
    kept: Counter[tuple[Any, ...]] = Counter()
    offset = 0
    for number, rows in enumerate(_traffic(seed)):
        table = _table(rows, offset)
        offset += len(rows)
        watermark = 1_000_000 + number * 8_000
        once: set[tuple[Any, ...]] = set()
        for shard, engine in enumerate(engines):
            out, cleanups[shard] = evaluate_batch(engine, table, watermark, cleanups[shard],
                                                  shard=shard, shards=shards, now_ms=0)
            for row in out.to_pylist():
                what = (row["kind"], row["offset"], row["rule_id"], row["transaction_id"],
                        row["aggregate"], row["value"] if row["kind"] != "alert" else None)
                if row["kind"] in ("alert", "current_rule"):
                    kept[what] += 1
                elif what not in once:
                    once.add(what)
                    kept[what] += 1
    return kept


@pytest.mark.parametrize("seed", range(6))
def test_rules_split_over_shards_give_one_engines_outputs(seed):
    one = _outputs(1, seed)
    assert sum(1 for kind, *_ in one if kind == "alert") > 0
    assert _outputs(2, seed) == one
    assert _outputs(3, seed) == one


def test_the_state_files_hold_the_split_they_were_made_with(tmp_path):
    fresh = EngineStateFiles(str(tmp_path / "a"))
    fresh.pin_shards(2)
    fresh.pin_shards(2)  # the same split again: fine
    with pytest.raises(StateFilesError, match=r"split over 2 shard.*set fraud\.shards to 2"):
        EngineStateFiles(str(tmp_path / "a")).pin_shards(3)

    single = EngineStateFiles(str(tmp_path / "b"))  # a single engine's files, from before
    single.write_changes(0, b"")
    single.pin_shards(1)
    with pytest.raises(StateFilesError, match="split over 1 shard"):
        single.pin_shards(2)
    assert EngineStateFiles(str(tmp_path / "b"), 1).folder.endswith("/engine-1")


def _spec(checkpoint: str, shard: int, shards: int) -> HostSpec:
    return HostSpec(checkpoint, shard, shards, False, 0, 3_600_000, 1_000_000, 500)


def test_an_engine_process_evaluates_persists_and_stops(tmp_path):
    checkpoint = str(tmp_path / "checkpoint")
    traffic = _traffic(3)
    tables, offset = [], 0
    for rows in traffic:
        tables.append(_table(rows, offset))
        offset += len(rows)
    EngineHost(_spec(checkpoint, 0, 2))  # shard 0 pins the split
    process = EngineProcess(_spec(checkpoint, 1, 2))
    try:
        process.call("restore", -1)
        remote = []
        for batch_id, table in enumerate(tables):
            remote.append(process.call("evaluate", batch_id, table, 1_000_000, 0))
            process.call("write_changes", batch_id)
        with pytest.raises(EngineProcessError, match="not a call of an engine host"):
            process.call("files")
    finally:
        process.close()
    assert process._process.returncode == 0

    # the same shard in this process: each batch from the state the process's files rebuild
    local = EngineHost(_spec(checkpoint, 1, 2))
    again = [local.evaluate(batch_id, table, 1_000_000, 0)
             for batch_id, table in enumerate(tables)]
    assert [t.to_pylist() for t in remote] == [t.to_pylist() for t in again]
    assert any(row["kind"] == "alert" for t in remote for row in t.to_pylist())


def test_an_engine_process_ends_with_its_driver_connection(tmp_path):
    process = EngineProcess(_spec(str(tmp_path / "c"), 1, 2))
    process._connection.close()  # as a killed driver's end of the socket closes
    assert process._process.wait(30) == 0


def test_a_job_on_a_checkpoint_split_otherwise_fails_at_start(make_settings):
    settings = make_settings(fraud={"shards": 3})
    EngineStateFiles(settings.lake.checkpoint(NAME)).pin_shards(2)  # an earlier run's split
    sink = FraudDriverSink(settings)
    try:
        with pytest.raises(StateFilesError, match=r"set fraud\.shards to 2"):
            sink.warm()  # the runner warms the sink before the query starts
        assert sink._others == []  # no engine process was left behind
    finally:
        sink.close()


def test_a_failed_evaluation_is_redone_from_the_files(tmp_path):
    """An evaluation that fails halfway (here: publishing its first alert) has moved memory
    ahead of the files: the retry of the batch starts again from the files."""
    tables, offset = [], 0
    for rows in _traffic(1):
        tables.append(_table(rows, offset))
        offset += len(rows)
    reference = EngineHost(_spec(str(tmp_path / "reference"), 0, 1))
    expected = []
    for batch_id, table in enumerate(tables):
        expected.append(reference.evaluate(batch_id, table, 1_000_000, 0).to_pylist())
        reference.write_changes(batch_id)
    alerting = next(i for i, rows in enumerate(expected) if any(
        row["kind"] == "alert" for row in rows))

    def refuse(rows: list[dict[str, Any]], index: int) -> None:
        raise RuntimeError("the topic is gone")

    host = EngineHost(_spec(str(tmp_path / "host"), 0, 1))
    for batch_id, table in enumerate(tables):
        if batch_id == alerting:
            with pytest.raises(RuntimeError, match="the topic is gone"):
                host.evaluate(batch_id, table, 1_000_000, 0, refuse)
        assert host.evaluate(batch_id, table, 1_000_000, 0).to_pylist() == expected[batch_id]
        host.write_changes(batch_id)


def test_closing_an_engine_process_reads_an_answer_still_owed(tmp_path):
    process = EngineProcess(_spec(str(tmp_path / "d"), 1, 2))
    process.call("restore", -1)
    process.begin("evaluate", 0, _table(_traffic(2)[0], 0), 1_000_000, 0)
    process.close()  # as after the driver's own shard failed while this one evaluated
    assert process._process.returncode == 0


def test_engine_processes_start_all_or_none(make_settings, monkeypatch):
    started: list[EngineProcess] = []

    def second_fails(spec: HostSpec) -> EngineProcess:
        if started:
            raise OSError("no more processes")
        started.append(EngineProcess(spec))
        return started[-1]

    monkeypatch.setattr(fraud_driver, "EngineProcess", second_fails)
    sink = FraudDriverSink(make_settings(fraud={"shards": 3}))
    try:
        with pytest.raises(OSError, match="no more processes"):
            sink.warm()
        assert sink._local is None and sink._others == []
        assert started[0]._process.returncode == 0  # the one started was stopped
    finally:
        sink.close()


def _committed(host: EngineHost, batches: list[list[tuple[str, int, bytes]]]
               ) -> Iterator[int]:
    """Each batch through the host and its changes written, as the sink does before Spark
    commits the batch: the batch's id, once it is durable."""
    offset = 0
    for batch_id, rows in enumerate(batches):
        host.evaluate(batch_id, _table(rows, offset), 1_000_000 + batch_id * 8_000, 0)
        offset += len(rows)
        host.write_changes(batch_id)
        yield batch_id


def test_a_snapshot_is_taken_once_the_change_files_outweigh_the_last(tmp_path, monkeypatch):
    """Driver state snapshots by size, as the spark mode does: once the change files since
    the last snapshot hold at least its bytes (and the floor), not every N batches; a
    restarted host counts the files it replayed and the snapshot it started from."""
    from spark_jobs.fraud.jobs import engine_host

    monkeypatch.setattr(engine_host, "MIN_SNAPSHOT_LOG_BYTES", 4_000)
    checkpoint = str(tmp_path / "cp")
    host = EngineHost(HostSpec(checkpoint, 0, 1, False, 0, 3_600_000, 1_000_000, 10_000))
    logged, sizes = [], [0]  # change bytes since the last snapshot; its size
    for batch_id in _committed(host, _traffic(3) + _traffic(4)):
        logged.append(len(host._changes))
        due = sum(logged) >= max(4_000, sizes[-1])
        host.maybe_snapshot(batch_id)  # Spark has committed it
        assert (host.snapshots.in_flight == batch_id) == due, (batch_id, logged, sizes)
        if due:
            assert host.snapshots.poll(wait=True) == batch_id
            sizes.append(host.files.snapshot_size(batch_id))
            logged = []
    assert len(sizes) >= 3 and max(sizes[1:-1]) > 4_000, (
        "the traffic must make a snapshot wait for more than the floor", sizes)

    restarted = EngineHost(HostSpec(checkpoint, 0, 1, False, 0, 3_600_000, 1_000_000, 10_000))
    restarted.restore(batch_id)
    assert restarted.snapshots.size == sizes[-1] and restarted._change_bytes == sum(logged)
    assert restarted.snapshot_due(batch_id) == (sum(logged) >= max(4_000, sizes[-1]))


def test_a_rebuild_during_a_snapshot_counts_only_the_files_after_it(tmp_path, monkeypatch):
    """A batch that fails while a snapshot is being written makes the host rebuild from the
    files, which still hold the older snapshot and every change file since: the snapshot in
    flight replaces them once published, so they must not count towards the next one."""
    from spark_jobs.fraud.jobs import engine_host

    monkeypatch.setattr(engine_host, "MIN_SNAPSHOT_LOG_BYTES", 4_000)
    host = EngineHost(HostSpec(str(tmp_path / "cp"), 0, 1, False, 0, 3_600_000, 1_000_000,
                               10_000))
    taken = None
    for batch_id in _committed(host, _traffic(3)):
        host.maybe_snapshot(batch_id)
        if host.snapshots.in_flight is not None:
            taken = batch_id
            break
    assert taken is not None, "the traffic is too small to start a snapshot"
    host.applied = None  # as a failed evaluation leaves it
    host.restore(taken)
    assert host.snapshots.in_flight == taken and host._change_bytes == 0
    assert host.snapshots.poll(wait=True) == taken
    assert not host.snapshot_due(taken)


def test_a_host_removes_what_unfinished_snapshots_left(tmp_path):
    spec = HostSpec(str(tmp_path / "cp"), 0, 1, False, 0, 3_600_000, 1_000_000, 10_000)
    folder = EngineHost(spec).files.folder
    orphan = tmp_path / "cp" / "engine" / ".snapshot-7.4242.tmp"
    orphan.write_bytes(b"half a snapshot")
    assert folder.endswith("engine")
    EngineHost(spec)  # a restarted job
    assert not orphan.exists()


def test_a_snapshot_is_taken_after_snapshot_every_batches_whatever_their_size(tmp_path):
    checkpoint = str(tmp_path / "cp")
    host = EngineHost(HostSpec(checkpoint, 0, 1, False, 0, 3_600_000, 1_000_000, 4))
    taken = []
    for batch_id in _committed(host, _traffic(5)):
        host.maybe_snapshot(batch_id)
        if host.snapshots.in_flight is not None:
            taken.append(host.snapshots.poll(wait=True))
    assert taken == [3, 7, 11]  # from -1 (no snapshot) every 4 batches; 12 batches of traffic


def _names(folder: str) -> set[str]:
    from pathlib import Path

    return {path.name for path in Path(folder).iterdir()}


def test_what_a_snapshot_replaces_is_deleted_by_tidy_a_few_files_at_a_time(tmp_path,
                                                                           monkeypatch):
    """Publishing a snapshot leaves the change files it replaces (thousands: deleting them
    took tens to hundreds of ms in one batch) for tidy(), oldest first, a few per batch, even
    while a newer snapshot is being written (whose temporary file is not among them)."""
    from spark_jobs.fraud.jobs import background_snapshots

    monkeypatch.setattr(background_snapshots, "TIDIED_PER_BATCH", 3)
    host = EngineHost(HostSpec(str(tmp_path / "cp"), 0, 1, False, 0, 3_600_000, 1_000_000, 4))
    folder = host.files.folder
    orphan = tmp_path / "cp" / "engine" / ".snapshot-1.4242.tmp"  # a killed writer's
    batches = _committed(host, _traffic(5))
    for batch_id in batches:
        host.maybe_snapshot(batch_id)
        if batch_id == 3:
            orphan.write_bytes(b"half a snapshot")
            assert host.snapshots.poll(wait=True) == 3
            break
    assert {"snapshot-3", "changes-0", "changes-3"} <= _names(folder)
    for batch_id in batches:  # the next snapshot starts before anything is tidied
        host.maybe_snapshot(batch_id)
        if host.snapshots.in_flight is not None:
            break
    assert host.snapshots.in_flight == 7
    host.tidy()
    assert {"changes-0", "changes-1", "changes-2"}.isdisjoint(_names(folder))
    assert {"changes-3", orphan.name} <= _names(folder), "three at a time"
    host.tidy()
    assert not orphan.exists() and "changes-3" not in _names(folder)
    assert host.snapshots.poll(wait=True) == 7, "the snapshot being written was left alone"
    for _ in range(3):
        host.tidy()
    assert _names(folder) == {"shards", "snapshot-7"}
    assert host.files.state_after(7)[2] == 7


def test_an_engine_process_tidies_once_it_has_written_a_batch(tmp_path):
    """Snapshots every 2 batches: 1 is started in batch 2, published in batch 3 and what it
    replaces (changes 0-1) deleted once batch 3's changes are written; 3 likewise in
    batches 4, 5 and 5."""
    import time

    checkpoint = str(tmp_path / "cp")
    EngineHost(_spec(checkpoint, 0, 2))  # shard 0 pins the split
    process = EngineProcess(HostSpec(checkpoint, 1, 2, False, 0, 3_600_000, 1_000_000, 2))
    folder = EngineStateFiles(checkpoint, 1).folder
    try:
        process.call("restore", -1)
        offset = 0
        for batch_id, rows in enumerate(_traffic(2)[:6]):
            if batch_id:
                process.call("maybe_snapshot", batch_id - 1)
            process.call("evaluate", batch_id, _table(rows, offset), 1_000_000, 0)
            offset += len(rows)
            process.call("write_changes", batch_id)
            time.sleep(0.3)  # a snapshot child of this small state is done by the next batch
        names = _names(folder)  # before close, which tidies too
    finally:
        process.close()
    assert {"snapshot-3", "changes-4", "changes-5"} <= names
    assert not {"snapshot-1", "changes-0", "changes-3"} & names


@pytest.mark.parametrize("seed", range(5))
def test_a_batch_is_read_in_the_contracts_arrival_order(seed):
    """input_rows_of sorts in Arrow as output_rows.arrival_order sorts rows: Kafka time, a
    rule before a transaction, then topic, partition and offset."""
    rng = random.Random(seed)
    rows = []
    for offset in range(200):
        kind = rng.choice([KIND_RULE, KIND_TRANSACTION, KIND_TRANSACTION])
        topic = TOPIC_RULES if kind == KIND_RULE else rng.choice(
            [TOPIC_TRANSACTIONS, "tx-b", "tx-\u00e9", "tx-\U0001f600"])
        rows.append(InputRow(kind, f"m{offset}".encode(), topic, rng.randrange(3), offset,
                             1_000 + rng.randrange(20), None, rng.choice([None, 7])))
    table = pa.table({name: [getattr(r, name) for r in rows] for name in InputRow._fields})
    assert input_rows_of(table) == sorted(rows, key=arrival_order)
    without_future = table.drop_columns([FUTURE_COLUMN])
    assert input_rows_of(without_future) == sorted(
        (r._replace(future_by_ms=None) for r in rows), key=arrival_order)
    # a message without a Kafka time comes first, as the shadow (recompute.py) reads it as -1
    untimed = [r._replace(kafka_timestamp=None) if r.kafka_offset % 7 == 0 else r for r in rows]
    table = pa.table({name: [getattr(r, name) for r in untimed] for name in InputRow._fields})
    assert input_rows_of(table) == sorted(untimed, key=lambda r: arrival_order(
        r._replace(kafka_timestamp=-1 if r.kafka_timestamp is None else r.kafka_timestamp)))


def test_an_engine_process_that_cannot_start_says_why(tmp_path):
    """The host is made in the process: its failure is its start's answer, with the cause,
    not a process found dead at the first call."""
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    process = EngineProcess(_spec(str(blocked / "checkpoint"), 1, 2))
    try:
        with pytest.raises(EngineProcessError, match=r"(?s)shard 1, start: .*NotADirectoryError"):
            process.started()
    finally:
        process.close()
    assert process._process.returncode == 0


@pytest.mark.kafka
def test_an_engine_process_s_alerts_are_sent_and_a_refused_one_becomes_a_dead_letter(
        kafka, tmp_path):
    """The driver sends the alerts an engine process found (read by column); one the topic
    refuses at once is its cause's `error` dead letter, every other row is as evaluated."""
    engine = FraudEngine(MemoryStore())
    found = []
    for number, rows in enumerate(_traffic(3)):
        out, _ = evaluate_batch(engine, _table(rows, 1000 * number), 1_000_000, now_ms=0)
        found.append(out.to_pylist())
    # the last alert made too large for the topic, in a batch after the first: the outputs
    # stay one chunk per batch, so a position is across chunks, as the driver's are
    last = max(n for n, out in enumerate(found) if any(r["kind"] == "alert" for r in out))
    assert last > 0
    in_batch = max(i for i, r in enumerate(found[last]) if r["kind"] == "alert")
    found[last][in_batch]["value"] = "x" * 2 * REFUSAL_LIMIT
    outputs = pa.concat_tables(pa.Table.from_pylist(out, schema=ARROW_OUTPUT_SCHEMA)
                               for out in found)
    assert outputs["kind"].num_chunks > 1
    rows = outputs.to_pylist()
    alerts = [i for i, row in enumerate(rows) if row["kind"] == "alert"]
    assert len(alerts) >= 3 and len(rows) > len(alerts)
    too_large = sum(len(out) for out in found[:last]) + in_batch
    topic = f"alerts_{tmp_path.name}"
    ensure_topics(kafka, [topic], 1)
    publisher = RefusingPublisher(make_producer(kafka, **{"message.max.bytes": REFUSAL_LIMIT}),
                                  topic)

    published = fraud_driver._published(outputs, publisher).to_pylist()

    assert publisher.flush() == []
    assert publisher.sent == len(alerts) - 1  # the others are all small enough
    refused = published[too_large]
    assert refused["kind"] == "dead_letter" and refused["reason"] == "error"
    assert refused["value"] is None and refused["offset"] == rows[too_large]["offset"]
    assert "MSG_SIZE_TOO_LARGE" in refused["detail"] and topic in refused["detail"]
    assert [row for i, row in enumerate(published) if i != too_large] == [
        row for i, row in enumerate(rows) if i != too_large]
    sent = [(m.key, m.value) for m in read_all(kafka, topic)]
    assert sent == [(f"{rows[i]['rule_id']}:{rows[i]['transaction_id']}".encode(),
                     rows[i]["value"].encode()) for i in alerts if i != too_large]


def test_the_driver_s_own_shard_sends_alerts_as_found_and_a_refused_one_is_a_dead_letter(
        kafka, tmp_path):
    """The shard evaluated in the driver's process sends each alert the moment it is found
    (publish_found); one the topic refuses at once (a transaction echoed in full makes its
    alert too large) is its cause's `error` dead letter in the batch's outputs, and every
    other row is as the same batch evaluates without sending."""
    padded = json.dumps({"transactionId": 99, "eventTime": 1_000_500, "payeeId": 1,
                         "paymentAmount": 80, "note": "x" * REFUSAL_LIMIT}).encode()
    rows = [(KIND_RULE, 1_000_000, _rule(1, limit=10))] + [
        (KIND_TRANSACTION, 1_000_001 + i, json.dumps({
            "transactionId": i, "eventTime": 1_000_000 + i, "payeeId": 1,
            "paymentAmount": 20}).encode()) for i in range(3)] + [
        (KIND_TRANSACTION, 1_000_600, padded)]
    expected, _ = evaluate_batch(FraudEngine(MemoryStore()), _table(rows, 0), 1_000_000,
                                 now_ms=0)
    topic = f"alerts_{tmp_path.name}"
    ensure_topics(kafka, [topic], 1)
    publisher = RefusingPublisher(make_producer(kafka, **{"message.max.bytes": REFUSAL_LIMIT}),
                                  topic)

    outputs, _ = evaluate_batch(FraudEngine(MemoryStore()), _table(rows, 0), 1_000_000,
                                on_alert=partial(fraud_driver.publish_found, publisher),
                                now_ms=0)

    assert publisher.flush() == []
    found, published = expected.to_pylist(), outputs.to_pylist()
    alerts = [i for i, row in enumerate(found) if row["kind"] == "alert"]
    assert len(alerts) == 4 and found[alerts[-1]]["transaction_id"] == "99"
    refused = published[alerts[-1]]
    assert refused["kind"] == "dead_letter" and refused["reason"] == "error"
    assert refused["value"] is None and refused["offset"] == found[alerts[-1]]["offset"]
    assert "MSG_SIZE_TOO_LARGE" in refused["detail"] and topic in refused["detail"]
    assert published[:alerts[-1]] == found[:alerts[-1]]
    sent = [(m.key, m.value) for m in read_all(kafka, topic)]
    assert sent == [(f"1:{found[i]['transaction_id']}".encode(), found[i]["value"].encode())
                    for i in alerts[:-1]]


def test_outputs_without_alerts_are_handed_on_as_they_are():
    outputs = pa.Table.from_pylist([], schema=ARROW_OUTPUT_SCHEMA)
    assert fraud_driver._published(outputs, None) is outputs  # type: ignore[arg-type]
