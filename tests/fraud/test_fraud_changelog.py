"""The driver-side engine's durability: change logs and snapshots rebuild the exact state, and
an engine rebuilt from them after any batch behaves as the one that never stopped."""

from __future__ import annotations

import gc
import json
import os
import pickle
import random
from array import array
from decimal import Decimal

import pytest

from spark_jobs.fraud.core import engine as engine_module
from spark_jobs.fraud.core.changelog import LoggedStore
from spark_jobs.fraud.core.engine import FraudEngine
from spark_jobs.fraud.core.isolation import apply_rule, apply_transaction
from spark_jobs.fraud.core.windows import ExactWindow
from spark_jobs.fraud.jobs.engine_state_files import EngineStateFiles, StateFilesError


def _rule(rule_id: int, keys: list[str], agg: str, minutes: int, limit: int) -> str:
    return json.dumps({"ruleId": rule_id, "ruleState": "ACTIVE", "groupingKeyNames": keys,
                       "aggregateFieldName": "paymentAmount" if agg != "COUNT" else
                       "COUNT_WITH_RESET_FLINK", "aggregatorFunctionType": "SUM",
                       "limitOperatorType": ">", "limit": limit, "windowMinutes": minutes})


def _batches(seed: int) -> list[list[tuple[str, str]]]:
    """Random batches of rules (added, deleted, cleared) and transactions, event time rising
    with some disorder."""
    rng = random.Random(seed)
    batches, clock, tid = [], 0, 0
    for _ in range(30):
        batch = []
        for _ in range(rng.randint(0, 40)):
            roll = rng.random()
            if roll < 0.05:
                batch.append(("rule", _rule(rng.randint(1, 4), rng.choice(
                    [["payeeId"], ["beneficiaryId"], ["payeeId", "beneficiaryId"]]),
                    rng.choice(["SUM", "COUNT"]), rng.randint(1, 3), rng.randint(1, 300))))
            elif roll < 0.07:
                batch.append(("rule", json.dumps({"ruleId": rng.randint(1, 4),
                                                  "ruleState": "DELETE"})))
            elif roll < 0.075:
                batch.append(("rule", json.dumps({"ruleState": "CONTROL",
                                                  "controlType": "CLEAR_STATE_ALL"})))
            else:
                tid += 1
                clock += rng.randint(0, 4_000)
                redelivered = rng.random() < 0.05 and tid > 1
                batch.append(("tx", json.dumps({
                    "transactionId": rng.randint(1, tid - 1) if redelivered else tid,
                    "eventTime": clock - rng.randint(0, 3_000), "payeeId": rng.randint(1, 5),
                    "beneficiaryId": rng.randint(1, 3), "paymentAmount": rng.randint(1, 90)})))
        batches.append(batch)
    return batches


def _run(engine: FraudEngine, batch: list[tuple[str, str]], watermark: int) -> list[str]:
    out = []
    for kind, raw in batch:
        results = (engine.on_rule(raw, 0) if kind == "rule"
                   else engine.on_transaction(raw, watermark, 0))
        out += [o.value for o in results]
    if engine.next_cleanup_ms(watermark) is not None:
        engine.cleanup(watermark)
    return out


@pytest.mark.parametrize("seed", range(4))
def test_an_engine_rebuilt_from_files_after_any_batch_continues_identically(tmp_path, seed):
    """The driver sink's cycle: changes per batch, a snapshot every 5 committed batches (which
    prunes what it replaces), a crash after any batch, a rebuild, the rest of the stream."""
    batches = _batches(seed)
    step = 9_000
    reference_engine = FraudEngine(LoggedStore())
    reference = [_run(reference_engine, b, step * i) for i, b in enumerate(batches)]
    for crash in range(0, len(batches), 3):
        files = EngineStateFiles(str(tmp_path / f"cp{seed}-{crash}"))
        store = LoggedStore()
        engine = FraudEngine(store)
        for batch_id in range(crash + 1):
            if batch_id and batch_id % 5 == 0:
                files.write_snapshot(batch_id - 1, store.snapshot())
            assert _run(engine, batches[batch_id], step * batch_id) == reference[batch_id]
            files.write_changes(batch_id, store.take_changes())
        snapshot, changes, _ = files.state_after(crash)
        rebuilt = LoggedStore.restore(snapshot)
        for change in changes:
            rebuilt.apply_changes(change)
        assert (rebuilt.by_rule, rebuilt.seen, rebuilt.meta) == (
            store.by_rule, store.seen, store.meta)
        again = FraudEngine(rebuilt)
        for batch_id in range(crash + 1, len(batches)):
            assert _run(again, batches[batch_id], step * batch_id) == reference[batch_id]


def test_replaying_changes_gives_the_same_store():
    store = LoggedStore()
    engine = FraudEngine(store)
    replica = LoggedStore.restore(None)
    for batch in _batches(99):
        _run(engine, batch, 0)
        replica.apply_changes(store.take_changes())
        assert (replica.by_rule, replica.seen, replica.meta) == (
            store.by_rule, store.seen, store.meta)
    copy = LoggedStore.restore(store.snapshot())
    assert (copy.by_rule, copy.seen, copy.meta) == (store.by_rule, store.seen, store.meta)


def test_seen_ids_put_around_an_expiry_replay_in_their_order():
    """Seen ids are logged in columns, but never across an expiry: one put before it and
    older than its bound is gone after the replay too, one put after it stays."""
    store = LoggedStore()
    replica = LoggedStore.restore(None)
    store.put_seen("1", 10)
    store.put_seen("2", 50)
    store.expire_seen(40)  # forgets "1"
    store.put_seen("3", 20)  # older than the bound, but put after the expiry: kept
    store.put_seen("4", 60)
    changes = store.take_changes()
    assert [change[0] for change in pickle.loads(changes)] == ["pss", "es", "pss"]
    replica.apply_changes(changes)
    assert replica.seen == store.seen == {"2": 50, "3": 20, "4": 60}


def test_logs_written_one_change_per_id_and_window_still_replay():
    """Change files from before the column forms (one "ps" per seen id, one "xw" per window
    extended) rebuild the same store as the columns do."""
    replica = LoggedStore.restore(None)
    replica.apply_changes(pickle.dumps([
        ("ps", "1", 10), ("ps", "2", 20),
        ("ew", [1], [len("{payeeId=1}")], "{payeeId=1}", [2], array("q", [5, 6]).tobytes(),
         "1.5,2")]))
    replica.apply_changes(pickle.dumps([("xw", 1, "{payeeId=1}", 1, [7], ["3"]),
                                        ("es", 15), ("ps", "3", 30)]))
    assert replica.get_window(1, "{payeeId=1}") == ([6, 7], ["2", "3"])
    assert replica.seen == {"2": 20, "3": 30}


def test_puts_logged_as_final_values_replay_around_removals():
    """Window puts are logged once, as they are at the end, after the batch's removals: a
    window removed after its put stays removed, one put again after a removal comes back with
    its last value, and untouched windows keep theirs."""
    store = LoggedStore()
    replica = LoggedStore.restore(None)
    for rule_id, key in ((1, "a"), (1, "b"), (2, "a"), (3, "c")):
        store.put_window(rule_id, key, ExactWindow([1], ["1"]))
    replica.apply_changes(store.take_changes())
    store.put_window(1, "a", ExactWindow([2], ["2"]))
    store.delete_window(1, "a")  # put, then removed: stays removed
    store.put_window(2, "a", ExactWindow([3], ["3"]))
    store.delete_rule_windows(2)
    store.put_window(2, "a", ExactWindow([4], ["4"]))  # removed, then put again
    store.put_window(2, "a", ExactWindow([5], ["5"]))  # ... twice: the last value counts
    store.clear_windows()
    store.put_window(3, "c", ExactWindow([6], ["6"]))  # cleared, then put again
    store.put_window(1, "b", ExactWindow([7], ["7"]))
    replica.apply_changes(store.take_changes())
    # a one-entry window replays as (time, value), the form the engine starts a window in
    assert replica.by_rule == store.by_rule == {3: {"c": (6, "6")}, 1: {"b": (7, "7")}}


@pytest.mark.parametrize("remove", ["window", "rule"])
def test_a_window_put_then_removed_in_one_batch_is_not_logged_back(remove):
    """The log keeps each window put as it was put (no look-up when it is taken): a removal
    must take it out, or the replay would bring back a window the store no longer has."""
    store, replica = LoggedStore(), LoggedStore.restore(None)
    store.put_window(1, "kept", (1, "1"))
    replica.apply_changes(store.take_changes())
    store.put_window(1, "gone", (2, "2"))  # a new key's one-entry window, as the engine puts
    store.put_window(2, "gone", ExactWindow([3, 4], ["3", "4"]))
    if remove == "window":
        store.delete_window(1, "gone")
        store.delete_window(2, "gone")
    else:
        store.delete_rule_windows(2)
        store.delete_window(1, "gone")
    replica.apply_changes(store.take_changes())
    assert replica.by_rule == store.by_rule == {1: {"kept": (1, "1")}}


def test_a_window_object_put_back_after_its_removal_is_logged_whole():
    """An exact window is logged by its changes only where the log already holds it: the
    same object put back after a removal is logged in full (a store holds each window
    object in one place; the engine never puts one object under two keys)."""
    store, replica = LoggedStore(), LoggedStore.restore(None)
    window = ExactWindow([1, 2], ["1", "2"])
    store.put_window(1, "a", window)
    replica.apply_changes(store.take_changes())
    store.delete_window(1, "a")
    window.add(3, Decimal(3))
    store.put_window(1, "a", window)
    replica.apply_changes(store.take_changes())
    assert replica.by_rule == store.by_rule
    assert replica.get_window(1, "a") == ([1, 2, 3], ["1", "2", "3"])


def test_a_missing_change_file_is_an_error_that_says_what_to_do(tmp_path):
    files = EngineStateFiles(str(tmp_path / "cp"))
    files.write_changes(0, LoggedStore().take_changes())
    files.write_changes(2, LoggedStore().take_changes())
    assert files.state_after(-1) == (None, [], None)
    with pytest.raises(StateFilesError, match=r"batches \[1\] are missing; delete"):
        files.state_after(2)
    files.write_snapshot(2, LoggedStore().snapshot())  # replaces everything up to 2
    snapshot, changes, base = files.state_after(2)
    assert (snapshot is not None, changes, base) == (True, [], 2)
    assert sorted(p.name for p in (tmp_path / "cp" / "engine").iterdir()) == ["snapshot-2"]


def test_a_long_lived_engine_cleans_by_due_time_not_by_scanning():
    """After the first clean-up (a full scan), windows are visited only when due: idle keys
    still go, and the clean-up touches far fewer windows than exist."""
    store = LoggedStore()
    engine = FraudEngine(store, late_retention_ms=0)
    engine.on_rule(_rule(1, ["transactionId"], "SUM", 1, 10**9), 0)
    visits = []
    get_window = store.get_window
    store.get_window = lambda *a: (visits.append(a), get_window(*a))[1]  # type: ignore[method-assign]
    watermark, cleanups, timer = 0, 0, None
    for i in range(3_000):  # a new key every 100 ms of event time, watermark 2 s behind
        t = i * 100
        engine.on_transaction(json.dumps({"transactionId": i, "eventTime": t, "payeeId": 1,
                                          "paymentAmount": 1}), watermark, 0)
        watermark = t - 2_000
        if timer is not None and watermark >= timer:  # the clean-up timer fires
            visits.clear()
            engine.cleanup(watermark)
            cleanups += 1
            if cleanups > 2:  # after the first, building scan
                assert len(visits) < 40, "only the windows that came due"
        timer = engine.next_cleanup_ms(watermark)
    assert cleanups > 100
    assert store.window_count() <= 10 * 60 + 40, "of 3,000 keys, one minute (+ lateness) left"


@pytest.mark.parametrize("seed", range(8))
def test_exact_windows_are_logged_by_their_changes_and_replay_to_the_same_entries(seed):
    """Appends, inserts among logged entries, front cuts (also past unlogged entries), and
    a log taken at random moments: replaying the log always rebuilds the window exactly, and
    a hot window is logged by its new entries, not all of them."""
    rng = random.Random(seed)
    store, replica = LoggedStore(), LoggedStore.restore(None)
    window, clock, deltas = ExactWindow(), 0, 0
    for step in range(400):
        clock += rng.randint(0, 30)
        late = rng.random() < 0.1
        window.add(clock - (rng.randint(0, 400) if late else 0), Decimal(rng.randint(1, 99)))
        if rng.random() < 0.15:
            window.expire(clock - rng.randint(0, 600), 100)
        store.put_window(1, "{payeeId=1}", window)
        if rng.random() < 0.3:
            changes = store.take_changes()
            deltas += any(change[0] == "xws" for change in pickle.loads(changes))
            replica.apply_changes(changes)
            assert replica.get_window(1, "{payeeId=1}") == window, step
    assert deltas > 20


def _store_after(batches: list[list[tuple[str, str]]], files: EngineStateFiles
                 ) -> tuple[LoggedStore, FraudEngine]:
    store = LoggedStore()
    engine = FraudEngine(store)
    for batch_id, batch in enumerate(batches):
        _run(engine, batch, 9_000 * batch_id)
        files.write_changes(batch_id, store.take_changes())
    return store, engine


def test_a_background_snapshot_is_the_state_when_it_started(tmp_path):
    """The forked child pickles the state as it was at start(), whatever the engine does
    meanwhile; poll() publishes it, and tidy() prunes the change files it replaces."""
    from spark_jobs.fraud.jobs.background_snapshots import BackgroundSnapshots

    files = EngineStateFiles(str(tmp_path / "cp"))
    batches = _batches(5)
    store, engine = _store_after(batches[:10], files)
    expected = pickle.loads(store.snapshot())
    (tmp_path / "cp" / "engine" / ".snapshot-4.999999.tmp").write_bytes(b"an orphan's")
    snapshots = BackgroundSnapshots(files)
    snapshots.start(9, store.snapshot)
    assert gc.isenabled(), "the parent collects again once the child is forked"
    assert snapshots.in_flight == 9
    with pytest.raises(RuntimeError, match="still being written"):
        snapshots.start(9, store.snapshot)
    for batch_id in range(10, 14):  # the parent goes on meanwhile
        _run(engine, batches[batch_id], 9_000 * batch_id)
        files.write_changes(batch_id, store.take_changes())
    assert snapshots.poll(wait=True) == 9
    assert snapshots.in_flight is None and snapshots.poll() is None
    published = sorted(p.name for p in (tmp_path / "cp" / "engine").iterdir())
    assert "snapshot-9" in published and "changes-0" in published, "pruned later, by tidy"
    assert files.state_after(13)[2] == 9, "the files it replaces are never read"
    snapshots.tidy(files=100)
    snapshot, changes, base = files.state_after(13)
    assert base == 9 and len(changes) == 4
    assert snapshot is not None and pickle.loads(snapshot) == expected
    assert sorted(p.name for p in (tmp_path / "cp" / "engine").iterdir()) == [
        "changes-10", "changes-11", "changes-12", "changes-13", "snapshot-9"]
    rebuilt = LoggedStore.restore(snapshot)
    for change in changes:
        rebuilt.apply_changes(change)
    assert (rebuilt.by_rule, rebuilt.seen, rebuilt.meta) == (store.by_rule, store.seen,
                                                             store.meta)


def test_a_failed_background_snapshot_leaves_the_change_files(tmp_path):
    from spark_jobs.fraud.jobs.background_snapshots import BackgroundSnapshots

    files = EngineStateFiles(str(tmp_path / "cp"))
    store, _ = _store_after(_batches(6)[:4], files)

    def failing() -> bytes:
        raise MemoryError("no room")

    snapshots = BackgroundSnapshots(files)
    snapshots.start(3, failing)
    assert snapshots.poll(wait=True) is None
    assert sorted(p.name for p in (tmp_path / "cp" / "engine").iterdir()) == [
        "changes-0", "changes-1", "changes-2", "changes-3"]
    snapshots.start(3, store.snapshot)  # a later one succeeds
    snapshots.close()
    assert files.state_after(3)[2] == 3


def test_a_background_snapshot_is_taken_at_the_lowest_cpu_priority(tmp_path):
    """The child pickles at niceness 19 (it must not take a core from the batches, whose
    alerts waited for it), while the parent keeps its own."""
    from spark_jobs.fraud.jobs.background_snapshots import BackgroundSnapshots

    files = EngineStateFiles(str(tmp_path / "cp"))
    ours = os.nice(0)
    snapshots = BackgroundSnapshots(files)
    snapshots.start(0, lambda: str(os.nice(0)).encode())  # the child's niceness, as its data
    assert snapshots.poll(wait=True) == 0
    assert os.nice(0) == ours
    snapshot, _, base = files.state_after(0)
    assert base == 0 and snapshot == str(min(ours + 19, 19)).encode()


@pytest.mark.parametrize("seed", range(4))
def test_two_copies_taking_turns_log_what_rebuilds_the_state(seed):
    """The spark mode's shards: two workers keep a copy of one shard and take turns with its
    batches; the copy that missed batches is brought forward with their logs, then logs its
    own. The logs in order rebuild the state of an engine that ran every batch, and each
    copy's engine gives that engine's outputs."""
    batches = _batches(seed)
    step = 9_000
    reference_engine = FraudEngine(LoggedStore())
    reference = [_run(reference_engine, b, step * i) for i, b in enumerate(batches)]
    rng = random.Random(seed)
    copies = [LoggedStore(), LoggedStore()]
    behind: list[list[bytes]] = [[], []]  # logs a copy has not applied yet
    logs = []
    for batch_id, batch in enumerate(batches):
        turn = rng.randint(0, 1)
        store = copies[turn]
        for change in behind[turn]:
            store.apply_changes(change)
        behind[turn] = []
        assert _run(FraudEngine(store), batch, step * batch_id) == reference[batch_id]
        change = store.take_changes()
        logs.append(change)
        behind[1 - turn].append(change)
    rebuilt = LoggedStore.restore(None)
    for change in logs:
        rebuilt.apply_changes(change)
    assert (rebuilt.by_rule, rebuilt.seen, rebuilt.meta) == (
        reference_engine.store.by_rule, reference_engine.store.seen,
        reference_engine.store.meta)


def test_a_one_entry_window_is_stored_as_its_pair_however_it_was_rebuilt():
    """Replayed whole, restored from a snapshot, or cut down to one entry by a replayed
    delta: a one-entry exact window is stored as (time, value), as the engine starts it, so
    two rebuilt stores holding the same windows compare equal."""
    store = LoggedStore()
    store.put_window(1, "a", ExactWindow([6], ["6"]))
    store.put_window(1, "b", ExactWindow([1, 2], ["1", "2"]))
    replayed = LoggedStore()
    replayed.apply_changes(store.take_changes())
    restored = LoggedStore.restore(store.snapshot())
    assert replayed.by_rule == restored.by_rule == {1: {"a": (6, "6"), "b": ([1, 2], ["1", "2"])}}
    window = store.get_window(1, "b")
    window.expire(2, 0)  # the entry at 1 leaves: a delta cutting one
    store.put_window(1, "b", window)
    replayed.apply_changes(store.take_changes())
    assert replayed.by_rule == {1: {"a": (6, "6"), "b": (2, "2")}}
    replayed.apply_changes(pickle.dumps([("xw", 1, "a", 0, [7], ["7"])]))  # a pair extended
    assert replayed.get_window(1, "a") == ([6, 7], ["6", "7"])


def test_a_replayed_state_shares_times_and_texts_as_the_live_one_does():
    """A rebuilt state holds one object per distinct event time and amount text, like the
    live engine it copies (one per entry made it ~50 % larger)."""
    store = LoggedStore()
    engine = FraudEngine(store)
    for rule_id in (1, 2, 3):
        engine.on_rule(_rule(rule_id, ["payeeId"], "SUM", rule_id, 10**9), 0)
    replica = LoggedStore.restore(None)
    T0 = 1_700_000_000_000  # times beyond the small ints Python caches anyway
    for number in range(40):
        engine.on_transaction(json.dumps({"transactionId": number, "eventTime": T0 + number // 2,
                                          "payeeId": number % 4, "paymentAmount": 7}), 0, 0)
        if number % 10 == 9:
            replica.apply_changes(store.take_changes())
    restored = LoggedStore.restore(replica.snapshot())
    for rebuilt in (replica, restored):
        entries = [ExactWindow.load(state) for _r, _k, state in rebuilt.windows()]
        assert sum(len(window) for window in entries) == 3 * 40
        assert len({id(text) for window in entries for text in window.values}) == 1
        assert len({id(t) for window in entries for t in window.times}) == 20


def test_windows_filed_again_by_replays_are_cleaned_once_and_not_multiplied():
    """A replay files every window it put in the due index again (caught_up): a clean-up
    visits each window once, and the copies do not pile up from batch to batch."""
    engine = FraudEngine(LoggedStore(), late_retention_ms=0)
    engine.on_rule(_rule(1, ["payeeId"], "SUM", 1, 10**9), 0)
    engine.on_transaction(json.dumps({"transactionId": 0, "eventTime": 0, "payeeId": 1,
                                      "paymentAmount": 1}), 0, 0)
    engine.cleanup(0)  # builds the due index
    filed = []
    for number in range(1, 200):
        t = number * 1_000
        engine.on_transaction(json.dumps({"transactionId": number, "eventTime": t,
                                          "payeeId": 1, "paymentAmount": 1}), t, 0)
        engine.caught_up({(1, "{payeeId=1}")})  # as a replica's replay files it again
        engine.cleanup(t)
        filed.append(len(engine._schedule.dues))
    # copies gather while the window's first entry is not due (its first minute), then
    # collapse into one at the clean-up that visits them
    assert max(filed[:60]) > 50 and max(filed[70:]) <= 3


@pytest.mark.parametrize("seed", range(12))
def test_windows_appended_in_place_replay_around_puts_and_removals(seed):
    """put_appended logs a window's delta at once, not at the take: mixed with puts of the
    same window (inserts, cuts, new objects), removals of a window, a rule or all, and takes
    at random moments, the replica rebuilt from the log always holds the store's windows."""
    rng = random.Random(seed)
    store, replica = LoggedStore(), LoggedStore.restore(None)
    clock, appended = 0, 0
    for step in range(600):
        rule_id, key = rng.randint(1, 2), f"k{rng.randint(1, 4)}"
        stored = store.get_window(rule_id, key)
        clock += rng.randint(0, 20)
        roll = rng.random()
        if roll < 0.45 and type(stored) is ExactWindow and len(stored):
            stored.add(max(clock, stored.times[-1]), Decimal(rng.randint(1, 99)))
            store.put_appended(rule_id, key, stored)  # appended only: the repeat path
            appended += 1
        elif roll < 0.65 and type(stored) is ExactWindow:
            if rng.random() < 0.5:
                stored.expire(clock - rng.randint(0, 300), 100)
            else:  # among the entries already logged
                stored.add(clock - rng.randint(0, 400), Decimal(rng.randint(1, 99)))
            if len(stored):
                store.put_window(rule_id, key, stored)
            else:
                store.delete_window(rule_id, key)
        elif roll < 0.8:  # a new window: one entry as the engine starts it, an object, or
            entry = (clock, str(rng.randint(1, 99)))  # lists (as a replay leaves them)
            form = rng.random()
            store.put_window(rule_id, key, entry if form < 0.3 else ExactWindow.load(entry)
                             if form < 0.8 else ([clock, clock + 1], ["1", "2"]))
        elif roll < 0.88:
            store.delete_window(rule_id, key)
        elif roll < 0.9:
            store.delete_rule_windows(rule_id)
        elif roll < 0.91:
            store.clear_windows()
        if rng.random() < 0.2:
            replica.apply_changes(store.take_changes())
            assert replica.by_rule == store.by_rule, step
    replica.apply_changes(store.take_changes())
    assert replica.by_rule == store.by_rule
    assert appended > 100


def test_a_window_the_log_must_take_whole_is_put_not_appended():
    """A window new since the last take (or changed among its logged entries) has no delta:
    put_appended files it as a put, logged whole, and later appends chain after it."""
    store, replica = LoggedStore(), LoggedStore.restore(None)
    window = ExactWindow([1, 2], ["1", "2"])
    store.put_window(1, "a", window)
    window.add(3, Decimal(3))
    store.put_appended(1, "a", window)  # new this batch: no delta to take
    replica.apply_changes(store.take_changes())
    assert replica.get_window(1, "a") == ([1, 2, 3], ["1", "2", "3"])
    window.add(4, Decimal(4))
    store.put_appended(1, "a", window)  # logged before: by its delta
    changes = pickle.loads(store.take_changes())
    assert [change[0] for change in changes] == ["xws"]
    replica.apply_changes(pickle.dumps(changes))
    assert replica.get_window(1, "a") == ([1, 2, 3, 4], ["1", "2", "3", "4"])


def test_an_entry_appended_before_the_message_fails_is_in_the_log(monkeypatch):
    """A message whose alert raises after its value entered a window is isolated (an
    `error` dead letter) and the live store keeps the entry: so must the log, or a rebuilt
    engine would hold a different window from the live one."""
    store, replica = LoggedStore(), LoggedStore.restore(None)
    engine = FraudEngine(store)
    apply_rule(engine, _rule(1, ["payeeId"], "SUM", 10, 250), 0, 0)

    def transaction(i: int) -> str:
        return json.dumps({"transactionId": i, "eventTime": i * 1000, "payeeId": 1,
                           "paymentAmount": 100})

    for i in (1, 2):
        apply_transaction(engine, transaction(i), 0, 0)
    replica.apply_changes(store.take_changes())
    apply_transaction(engine, transaction(3), 0, 0)  # the repeat path, logged at once

    def failing_alert(*args: object) -> None:
        raise RuntimeError("unforeseen")

    monkeypatch.setattr(engine_module, "alert", failing_alert)
    (output,) = apply_transaction(engine, transaction(4), 0, 0)
    assert output.kind == "dead_letter"
    replica.apply_changes(store.take_changes())
    assert replica.get_window(1, "{payeeId=1}") == store.get_window(1, "{payeeId=1}")
    assert len(store.get_window(1, "{payeeId=1}")) == 4


def test_a_copy_brought_forward_past_a_widening_reads_the_new_horizon():
    """Copies taking turns (the spark mode): a copy that replays another's widening of a
    rule must evaluate with the horizon it noted, as an engine that never stopped does."""
    def rule(minutes: int) -> str:
        return json.dumps({"ruleId": 1, "ruleState": "ACTIVE", "groupingKeyNames": ["payeeId"],
                           "aggregateFieldName": "paymentAmount",
                           "aggregatorFunctionType": "SUM", "limitOperatorType": ">",
                           "limit": 150, "windowMinutes": minutes})

    def transaction(i: int, t: int) -> str:
        return json.dumps({"transactionId": i, "eventTime": t, "payeeId": 1,
                           "paymentAmount": 100})

    reference = FraudEngine(LoggedStore(), late_retention_ms=0)
    a_store, b_store = LoggedStore(), LoggedStore()
    a = FraudEngine(a_store, late_retention_ms=0)
    b = FraudEngine(b_store, late_retention_ms=0)
    for engine in (reference, b):  # batch 0 on B
        engine.on_rule(rule(1), 0, 0)
        engine.on_transaction(transaction(1, 0), 0, 0)
    a_store.apply_changes(b_store.take_changes())
    a.caught_up(set())
    for engine in (reference, a):  # batch 1 on A: the window widened at watermark 70 s
        engine.on_rule(rule(5), 0, 70_000)
    b_store.apply_changes(a_store.take_changes())
    b.caught_up(set())
    expected = [o.value for o in reference.on_transaction(transaction(2, 70_000), 70_000, 0)]
    assert [o.value for o in b.on_transaction(transaction(2, 70_000), 70_000, 0)] == expected
