"""The fraud engine (CONTRACTS.md section 7): one ordered stream of rules and transactions.

Every semantic rule of the contract has its own test; the seeded randomized comparison with
a brute-force reference is in test_fraud_reference.py, the retention rule's clauses in
test_fraud_retention.py.
"""

from __future__ import annotations

import json
import random
from decimal import Context, Decimal
from typing import Any

import pytest

from spark_jobs.fraud.core.engine import FraudEngine, MemoryStore, Output
from spark_jobs.fraud.core.outputs import json_string
from spark_jobs.fraud.core.windows import ExactWindow, exact_entries, window_size

MIN = 60_000


def rule(
    rule_id: int = 1,
    state: str = "ACTIVE",
    keys: tuple[str, ...] = ("payeeId",),
    field: str = "paymentAmount",
    agg: str = "SUM",
    op: str = ">",
    limit: Any = 100,
    minutes: int = 1,
) -> bytes:
    return json.dumps(
        {
            "ruleId": rule_id,
            "ruleState": state,
            "groupingKeyNames": list(keys),
            "aggregateFieldName": field,
            "aggregatorFunctionType": agg,
            "limitOperatorType": op,
            "limit": limit,
            "windowMinutes": minutes,
        }
    ).encode()


def control(kind: str) -> bytes:
    return json.dumps({"ruleState": "CONTROL", "controlType": kind}).encode()


def txn(tid: Any, t: int, payee: Any = 1, amount: str | None = "10", **extra: Any) -> bytes:
    """A transaction; amount is JSON text (None leaves the field out)."""
    text = json.dumps({"transactionId": tid, "eventTime": t, "payeeId": payee, **extra})
    if amount is not None:
        text = text[:-1] + f', "paymentAmount": {amount}}}'
    return text.encode()


def make(alert_on_late: bool = False, bucket_ms: int = 0, **options: Any) -> FraudEngine:
    return FraudEngine(MemoryStore(pickled=True), alert_on_late, bucket_ms, **options)


def fired(outputs: list[Output]) -> list[tuple[int, str, str]]:
    """(ruleId, groupingKey, aggregate text) of the alerts."""
    return [
        (o.data["ruleId"], o.data["groupingKey"], str(o.data["aggregate"]))
        for o in outputs
        if o.kind == "alert"
    ]


class Feed:
    """An engine plus a running transaction id, for short scenario tests."""

    def __init__(self, engine: FraudEngine | None = None) -> None:
        self.engine = engine or make()
        self.next_id = 0

    def rule(self, raw: bytes) -> list[Output]:
        return self.engine.on_rule(raw, arrival_ms=0)

    def pay(self, t: int, payee: Any = 1, amount: str | None = "10", wm: int = -(10**15),
            **extra: Any) -> list[tuple[int, str, str]]:
        self.next_id += 1
        raw = txn(self.next_id, t, payee, amount, **extra)
        return fired(self.engine.on_transaction(raw, watermark_ms=wm, now_ms=0))


def count_rule(rule_id: int = 1, limit: int = 1, minutes: int = 1, **kw: Any) -> bytes:
    """Alerts when the number of the key's transactions in the window exceeds limit."""
    return rule(rule_id, field="COUNT_FLINK", limit=limit, minutes=minutes, **kw)


# -- windows ------------------------------------------------------------------------------------
def test_window_bounds_are_inclusive_at_both_ends():
    feed = Feed()
    feed.rule(count_rule(limit=1, minutes=1))
    assert feed.pay(0) == []
    assert feed.pay(MIN) == [(1, "{payeeId=1}", "2")]  # T - w == 0: still in
    assert feed.pay(2 * MIN + 1) == []  # [MIN + 1, 2 MIN + 1]: only itself


def test_equal_timestamps_all_count():
    feed = Feed()
    feed.rule(count_rule(limit=2, minutes=0))  # a zero window holds exactly one timestamp
    assert feed.pay(500) == []
    assert feed.pay(500) == []
    assert feed.pay(500) == [(1, "{payeeId=1}", "3")]
    assert feed.pay(501) == []


def test_a_transaction_never_sees_later_arrivals_nor_later_event_times():
    feed = Feed()
    feed.rule(count_rule(limit=1, minutes=10))
    assert feed.pay(100_000) == []
    assert feed.pay(50_000) == []  # the earlier arrival at 100 000 is after its window
    assert feed.pay(100_000) == [(1, "{payeeId=1}", "3")]


def test_aggregate_covers_the_current_transaction():
    feed = Feed()
    feed.rule(rule(limit=20, minutes=1))
    assert feed.pay(0, amount="21.0") == [(1, "{payeeId=1}", "21.0")]


def test_windows_are_per_key():
    feed = Feed()
    feed.rule(count_rule(limit=1, keys=("payeeId", "beneficiaryId")))
    assert feed.pay(0, payee=25, beneficiaryId=12) == []
    assert feed.pay(1, payee=25, beneficiaryId=13) == []
    assert feed.pay(2, payee=26, beneficiaryId=12) == []
    assert feed.pay(3, payee=25, beneficiaryId=12) == [(1, "{payeeId=25;beneficiaryId=12}", "2")]
    assert feed.pay(4, payee="25", beneficiaryId=12) == [(1, "{payeeId=25;beneficiaryId=12}", "3")]


# -- aggregators and operators through the engine ---------------------------------------------
@pytest.mark.parametrize(
    ("agg", "expected"),
    [("SUM", "17.25"), ("AVG", "5.75"), ("MIN", "-4.25"), ("MAX", "21.50")],
)
def test_every_aggregator_over_the_window(agg, expected):
    feed = Feed()
    feed.rule(rule(agg=agg, op="!=", limit=-999, minutes=1))
    feed.pay(0, amount="21.50")
    feed.pay(1, amount="-4.25")
    assert feed.pay(2, amount="0.00") == [(1, "{payeeId=1}", expected)]


@pytest.mark.parametrize(
    ("op", "fires_at"),
    [
        ("EQUAL", [20]),
        ("NOT_EQUAL", [10, 30]),
        ("GREATER", [30]),
        ("LESS", [10]),
        ("GREATER_EQUAL", [20, 30]),
        ("LESS_EQUAL", [10, 20]),
    ],
)
def test_every_operator_against_the_limit(op, fires_at):
    feed = Feed()
    feed.rule(rule(op=op, limit=20, minutes=0))
    fired_sums = [total for total, t in ((10, 0), (20, 1), (30, 2))
                  if feed.pay(t, amount=str(total))]
    assert fired_sums == fires_at


def test_missing_and_non_numeric_values_are_skipped():
    feed = Feed()
    feed.rule(rule(agg="AVG", op=">=", limit=10, minutes=1))
    assert feed.pay(0, amount=None) == []
    assert feed.pay(1, amount='"500"') == []  # a string is not a number
    assert feed.pay(2, amount="true") == []
    assert feed.pay(3, amount="null") == []
    assert feed.pay(4, amount="12") == [(1, "{payeeId=1}", "12")]  # the average of one value
    # a transaction without a value is still evaluated, over the values of the others
    assert feed.pay(5, amount=None) == [(1, "{payeeId=1}", "12")]


@pytest.mark.parametrize("op", ["<", "<=", "!=", "="])
def test_a_window_without_values_never_alerts(op):
    feed = Feed()
    feed.rule(rule(op=op, limit=0, minutes=1))
    assert feed.pay(0, amount=None) == []
    assert feed.pay(1, amount='"x"') == []


# -- rule lifecycle -----------------------------------------------------------------------------
def test_transactions_before_the_rule_was_added_are_not_seen():
    feed = Feed()
    feed.pay(0)
    feed.pay(1)
    feed.rule(count_rule(limit=1))
    assert feed.pay(2) == []
    assert feed.pay(3) == [(1, "{payeeId=1}", "2")]


def test_paused_rules_collect_without_alerting_and_cover_the_pause_once_active():
    feed = Feed()
    feed.rule(count_rule(limit=2))
    feed.rule(count_rule(limit=2, state="PAUSE"))
    assert [feed.pay(t) for t in (0, 1, 2)] == [[], [], []]
    feed.rule(count_rule(limit=2))
    assert feed.pay(3) == [(1, "{payeeId=1}", "4")]


def test_an_update_with_the_same_keys_keeps_state_and_applies_from_the_next_transaction():
    feed = Feed()
    feed.rule(count_rule(limit=5, minutes=10))
    assert [feed.pay(t * MIN) for t in (0, 1, 2)] == [[], [], []]
    feed.rule(count_rule(limit=2, minutes=10))  # lower limit: fires on the state kept
    assert feed.pay(3 * MIN) == [(1, "{payeeId=1}", "4")]
    feed.rule(count_rule(limit=2, minutes=1))  # narrower window
    assert feed.pay(4 * MIN) == []  # [3, 4] minutes: 2 transactions
    feed.rule(count_rule(limit=2, minutes=1, agg="MAX", op="<"))  # aggregator change too
    assert feed.pay(5 * MIN) == [(1, "{payeeId=1}", "1")]


def test_an_update_with_other_keys_starts_empty():
    feed = Feed()
    feed.rule(count_rule(limit=1))
    feed.pay(0, beneficiaryId=2)
    feed.rule(count_rule(limit=1, keys=("payeeId", "beneficiaryId")))
    assert feed.pay(1, beneficiaryId=2) == []
    assert feed.pay(2, beneficiaryId=2) == [(1, "{payeeId=1;beneficiaryId=2}", "2")]
    feed.rule(count_rule(limit=1, keys=("beneficiaryId", "payeeId")))  # order matters
    assert feed.pay(3, beneficiaryId=2) == []


def test_an_update_of_the_aggregated_field_starts_empty_even_between_count_variants():
    feed = Feed()
    feed.rule(rule(op=">", limit=15))
    feed.pay(0, amount="10")
    feed.rule(rule(field="fee", op=">", limit=15))  # stored paymentAmount values are no fees
    assert feed.pay(1, amount="10", fee=10) == []
    feed.rule(count_rule(limit=1))
    feed.pay(2)
    feed.rule(rule(field="COUNT_WITH_RESET_FLINK", limit=1))  # another field: starts empty
    assert feed.pay(3) == []
    assert feed.pay(4) == [(1, "{payeeId=1}", "2")]


def test_delete_drops_the_state_so_a_re_added_rule_starts_empty():
    feed = Feed()
    feed.rule(count_rule(limit=1))
    feed.pay(0)
    assert feed.rule(b'{"ruleId": 1, "ruleState": "DELETE"}') == []
    assert feed.pay(1) == []  # no rule
    assert feed.engine.store.window_count() == 0
    feed.rule(count_rule(limit=1))
    assert feed.pay(2) == []
    assert feed.pay(3) == [(1, "{payeeId=1}", "2")]
    assert feed.rule(b'{"ruleId": 99, "ruleState": "DELETE"}') == []  # unknown id: no-op
    assert [r.rule_id for r in feed.engine.rules()] == [1]


def test_delete_rules_all_drops_every_rule_and_its_state():
    feed = Feed()
    feed.rule(count_rule(1, limit=1))
    feed.rule(count_rule(2, limit=1, state="PAUSE"))
    feed.pay(0)
    feed.rule(control("DELETE_RULES_ALL"))
    assert feed.engine.rules() == []
    assert feed.engine.store.window_count() == 0
    assert feed.pay(1) == []
    feed.rule(count_rule(1, limit=1))
    assert feed.pay(2) == []


def test_clear_state_all_clears_windows_but_keeps_rules():
    feed = Feed()
    feed.rule(count_rule(limit=1))
    feed.pay(0)
    feed.rule(control("CLEAR_STATE_ALL"))
    assert [r.rule_id for r in feed.engine.rules()] == [1]
    assert feed.pay(1) == []
    assert feed.pay(2) == [(1, "{payeeId=1}", "2")]


def test_export_rules_current_sends_active_and_paused_rules_as_last_received_by_id():
    feed = Feed()
    raw3 = b'{"ruleId":3, "ruleState":"PAUSE","groupingKeyNames":[],"aggregateFieldName":"x",' \
           b'"aggregatorFunctionType":"MAX","limitOperatorType":"<","limit":1.50,"windowMinutes":2}'
    feed.rule(raw3)
    feed.rule(count_rule(1, limit=1))
    feed.rule(count_rule(2, limit=1))
    feed.rule(count_rule(1, limit=7))  # last received wins
    feed.rule(b'{"ruleId": 2, "ruleState": "DELETE"}')
    exported = feed.rule(control("EXPORT_RULES_CURRENT"))
    assert [o.kind for o in exported] == ["current_rule", "current_rule"]
    assert [o.value for o in exported] == [count_rule(1, limit=7).decode(), raw3.decode()]
    assert [o.data["ruleId"] for o in exported] == [1, 3]


def test_an_invalid_rule_yields_a_rule_error_and_changes_nothing():
    feed = Feed()
    feed.rule(count_rule(limit=1))
    feed.pay(0)
    bad = rule(keys=("beneficiaryId",), agg="MEDIAN")
    (error,) = feed.rule(bad)
    assert error.kind == "rule_error"
    assert json.loads(error.value) == {
        "rule": bad.decode(),
        "error": "unknown aggregatorFunctionType 'MEDIAN' (expected one of SUM, AVG, MIN, MAX)",
    }
    (garbage,) = feed.rule(b"\xff not json")
    assert json.loads(garbage.value)["rule"] == "\ufffd not json"
    assert feed.pay(1) == [(1, "{payeeId=1}", "2")]  # same rule, same state


def test_count_with_reset_clears_only_that_rules_window_for_that_key():
    feed = Feed()
    feed.rule(rule(1, field="COUNT_WITH_RESET_FLINK", limit=1, minutes=10))
    feed.rule(count_rule(2, limit=1, minutes=10))
    assert feed.pay(0, payee=1) == []
    assert feed.pay(1, payee=2) == []
    assert feed.pay(2, payee=1) == [(1, "{payeeId=1}", "2"), (2, "{payeeId=1}", "2")]
    # rule 1 forgot payee 1, the current transaction included; rule 2 and payee 2 did not
    assert feed.pay(3, payee=1) == [(2, "{payeeId=1}", "3")]
    assert feed.pay(4, payee=2) == [(1, "{payeeId=2}", "2"), (2, "{payeeId=2}", "2")]
    assert feed.pay(5, payee=1) == [(1, "{payeeId=1}", "2"), (2, "{payeeId=1}", "4")]


def test_a_paused_reset_rule_does_not_reset():
    feed = Feed()
    feed.rule(rule(field="COUNT_WITH_RESET_FLINK", limit=1, state="PAUSE"))
    feed.pay(0)
    feed.pay(1)
    feed.rule(rule(field="COUNT_WITH_RESET_FLINK", limit=1))
    assert feed.pay(2) == [(1, "{payeeId=1}", "3")]


# -- late, redelivered and malformed transactions -------------------------------------------
@pytest.mark.parametrize("alert_on_late", [False, True])
def test_late_transactions_enter_the_windows_and_alert_only_when_configured(alert_on_late):
    feed = Feed(make(alert_on_late=alert_on_late))
    feed.rule(count_rule(limit=1, minutes=10))
    assert feed.pay(3 * MIN, wm=0) == []
    assert feed.pay(5 * MIN, wm=0) == [(1, "{payeeId=1}", "2")]
    late = feed.pay(4 * MIN, wm=4 * MIN + 1)  # sees 3 and 4 minutes
    assert late == ([(1, "{payeeId=1}", "2")] if alert_on_late else [])
    assert feed.pay(6 * MIN, wm=4 * MIN + 1) == [(1, "{payeeId=1}", "4")]  # it counted
    assert feed.engine.counters["late"] == 1


def test_a_redelivered_transaction_counts_once_and_never_alerts_twice():
    engine = make()
    engine.on_rule(count_rule(limit=0), 0)
    first = engine.on_transaction(txn(7, 0), 0, 0)
    again = engine.on_transaction(txn(7, 0), 0, 0)
    changed = engine.on_transaction(txn(7, 5, amount="99"), 0, 0)  # same id, other content
    assert fired(first) == [(1, "{payeeId=1}", "1")]
    assert [(o.kind, o.data["reason"]) for o in again + changed] == [
        ("dropped", "duplicate")] * 2, "counted as dropped (duplicate), never alerted"
    assert fired(engine.on_transaction(txn("7", 1), 0, 0)) == [(1, "{payeeId=1}", "2")]
    assert engine.counters["duplicates"] == 2


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"not json", "not valid JSON"),
        (b"\xff", "not valid UTF-8"),
        (None, "empty message"),
        (b'{"transactionId": 1}', "missing field 'eventTime'"),
        (b'{"transactionId": 1, "eventTime": 1.5}', "'eventTime' must be an integer"),
        (b"[1]", "must be a JSON object"),
    ],
)
def test_malformed_transactions_become_dead_letters(raw, reason):
    engine = make()
    engine.on_rule(count_rule(limit=0), 0)
    (output,) = engine.on_transaction(raw, 0, 0)
    assert output.kind == "dead_letter"
    assert output.data["reason"] == "malformed"
    assert reason in output.data["detail"]
    assert output.value == ("" if raw is None else raw.decode(errors="replace"))


def test_the_alert_message_of_the_contract():
    engine = make()
    engine.on_rule(rule(keys=("payeeId", "beneficiaryId"), op=">", limit=20), 0)
    raw = (b'{"transactionId": 1, "eventTime": 1767225600000, "payeeId": 1001,'
           b' "beneficiaryId": 1002, "paymentAmount": 21.0, "paymentType": "CSH", "x": 1e2}')
    (output,) = engine.on_transaction(raw, 0, now_ms=1767225600123)
    assert output.kind == "alert"
    assert output.value == (
        '{"ruleId":1,"groupingKey":"{payeeId=1001;beneficiaryId=1002}","aggregate":21.0,'
        '"limit":20,"triggeringEvent":' + raw.decode() + ',"alertTime":1767225600123}'
    )
    message = json.loads(output.value)
    assert message["triggeringEvent"] == json.loads(raw)
    assert output.data["aggregate"] == Decimal("21.0")
    assert output.data["triggeringEvent"]["paymentType"] == "CSH"


def test_rule_order_decides_alert_order():
    feed = Feed()
    for rule_id in (3, 1, 2):
        feed.rule(count_rule(rule_id, limit=0))
    assert [a[0] for a in feed.pay(0)] == [1, 2, 3]


# -- state, clean-up, restart -------------------------------------------------------------------
def window_times(engine: FraudEngine, rule_id: int, key: str) -> list[int]:
    return list(exact_entries(engine.store.get_window(rule_id, key))[0])


def test_cleanup_keeps_what_the_rules_window_still_needs():
    feed = Feed(make(late_retention_ms=0))
    feed.rule(count_rule(1, limit=99, minutes=1))
    feed.rule(count_rule(2, limit=99, minutes=3))
    for t in (0, MIN, 2 * MIN, 3 * MIN):
        feed.pay(t)
    engine = feed.engine
    engine.cleanup(watermark_ms=3 * MIN)
    # evaluations ahead have T >= 3 min: rule 1 needs >= 2 min, rule 2 needs >= 0
    assert window_times(engine, 1, "{payeeId=1}") == [2 * MIN, 3 * MIN]
    assert window_times(engine, 2, "{payeeId=1}") == [0, MIN, 2 * MIN, 3 * MIN]
    engine.cleanup(watermark_ms=3 * MIN + 1)
    assert window_times(engine, 2, "{payeeId=1}") == [MIN, 2 * MIN, 3 * MIN]
    engine.cleanup(watermark_ms=10 * MIN)
    assert engine.store.window_count() == 0
    assert engine.store.seen == {}
    assert engine.next_cleanup_ms(10 * MIN) is None


def test_a_new_keys_window_is_kept_as_its_one_entry_until_a_second_comes():
    """Most (rule, key) windows never see a second transaction: stored as the (time, value)
    pair, not a window object and two lists (~300 B less each); the second entry makes it a
    window, whose aggregate covers both."""
    engine = FraudEngine(MemoryStore(), late_retention_ms=0)
    engine.on_rule(rule(limit=25), 0)
    engine.on_transaction(txn(1, 1_000, amount="10.50"), 0, 0)
    assert engine.store.get_window(1, "{payeeId=1}") == (1_000, "10.50")
    assert type(engine.store.get_window(1, "{payeeId=1}")) is tuple
    assert window_size(engine.store.get_window(1, "{payeeId=1}")) == 1
    assert fired(engine.on_transaction(txn(2, 2_000, amount="15"), 0, 0)) == [
        (1, "{payeeId=1}", "25.50")]
    stored = engine.store.get_window(1, "{payeeId=1}")
    assert isinstance(stored, ExactWindow)
    assert exact_entries(stored) == ([1_000, 2_000], ["10.50", "15"])


def test_a_one_entry_window_compares_equal_in_every_stored_form():
    assert ExactWindow([5], ["1.5"]) == (5, "1.5") == ExactWindow([5], ["1.5"])
    assert ExactWindow([5], ["1.5"]) == ([5], ["1.5"])
    assert ExactWindow([5], ["1.5"]) != (5, "1.6")
    assert ExactWindow.load((5, "1.5")) == ExactWindow([5], ["1.5"])
    assert exact_entries(None) == ([], [])


def test_every_window_holds_one_shared_text_per_amount():
    """A transaction's value text is made once and shared by every rule's window it enters,
    new or long, and equal amounts of other transactions share it too: a text per rule and
    transaction was most of the state held (~440 B per transaction with the demo rules)."""
    engine = FraudEngine(MemoryStore(), late_retention_ms=0)
    engine.on_rule(rule(1, limit=10**6), 0)
    engine.on_rule(rule(2, keys=("payeeId", "beneficiaryId"), agg="MAX", limit=10**6), 0)
    engine.on_rule(rule(3, agg="MIN", limit=10**6, minutes=2), 0)
    for number in range(4):  # the payee's windows grow; each pair's starts as one entry
        engine.on_transaction(txn(number, number, amount="12.50", beneficiaryId=number), 0, 0)
    texts = [text for _rule, _key, state in engine.store.windows()
             for text in exact_entries(state)[1]]
    assert len(texts) == 4 + 4 + 4 and set(texts) == {"12.50"}
    assert len({id(text) for text in texts}) == 1


def test_a_long_window_answers_each_aggregator_a_rule_update_switches_to():
    """An update keeping the keys and field keeps the window and its in-memory index: a
    long window then answers MIN, MAX, SUM and MIN again exactly, the index rebuilt for
    each function (the first extreme's text: 3 before 3.0 and 3.00)."""
    engine = FraudEngine(MemoryStore(), late_retention_ms=0)
    engine.on_rule(rule(limit=-1, agg="MIN", minutes=60), 0)
    for number, amount in enumerate(["3", "1.5", "3.0", "2", "1.50"] * 8):  # 88.00 in all
        engine.on_transaction(txn(number, number, amount=amount), 0, 0)
    for number, (agg, amount, expected) in enumerate((
            ("MAX", "2", "3"), ("SUM", "0.5", "90.50"), ("MIN", "2", "0.5"),
            ("MAX", "3.00", "3"), ("MIN", "1.2", "0.5"))):
        engine.on_rule(rule(limit=-1, agg=agg, minutes=60), 0)
        at = 100 + number
        assert fired(engine.on_transaction(txn(at, at, amount=amount), 0, 0)) == [
            (1, "{payeeId=1}", expected)], agg


def test_new_windows_of_one_transaction_share_their_one_entry():
    """Every rule of the same field starting a window at one transaction stores the same
    immutable (time, text) pair; bucket mode's lists, changed in place, are never shared."""
    for bucket_ms, shared in ((0, True), (1_000, False)):
        engine = FraudEngine(MemoryStore(), bucket_ms=bucket_ms, late_retention_ms=0)
        engine.on_rule(rule(1, limit=10**6), 0)
        engine.on_rule(rule(2, keys=("payeeId", "beneficiaryId"), agg="MIN", limit=10**6), 0)
        engine.on_transaction(txn(1, 5, amount="12.50", beneficiaryId=9), 0, 0)
        first = engine.store.get_window(1, "{payeeId=1}")
        second = engine.store.get_window(2, "{payeeId=1;beneficiaryId=9}")
        assert (first is second) is shared
        engine.on_transaction(txn(2, 6, amount="1", beneficiaryId=9), 0, 0)
        assert window_size(engine.store.get_window(2, "{payeeId=1;beneficiaryId=9}")) == (
            2 if bucket_ms == 0 else 1)
        assert window_size(engine.store.get_window(1, "{payeeId=1}")) == (
            2 if bucket_ms == 0 else 1)
        if bucket_ms:  # one bucket of both transactions in each rule, counted once
            assert engine.store.get_window(1, "{payeeId=1}")[2] == [2]
            assert engine.store.get_window(2, "{payeeId=1;beneficiaryId=9}")[2] == [2]


@pytest.mark.parametrize("seed", range(20))
def test_seen_ids_expire_exactly_by_event_time(seed):
    """The store files seen ids by the second of their eventTime: an expiry forgets exactly
    the ids before its bound, whatever the arrival order, and returns the oldest time kept;
    an id put again at another time lives by its newest time."""
    rng = random.Random(seed)
    store, reference = MemoryStore(), {}
    for _step in range(600):
        if rng.random() < 0.1:
            bound = rng.randint(0, 120) * 100  # often equal to a time, often mid-second
            kept = {i: t for i, t in reference.items() if t >= bound}
            assert store.expire_seen(bound) == min(kept.values(), default=None)
            reference = kept
            assert store.seen == reference
        else:
            transaction_id = str(rng.randint(0, 300))
            event_time = rng.randint(0, 120) * 100
            store.put_seen(transaction_id, event_time)
            reference[transaction_id] = event_time
        assert all(store.is_seen(i) for i in reference)

def test_windows_are_trimmed_as_their_keys_see_transactions():
    engine = make(late_retention_ms=0)
    engine.on_rule(count_rule(limit=99, minutes=1), 0)
    for number, t in enumerate((0, MIN, 2 * MIN)):
        engine.on_transaction(txn(number, t), watermark_ms=t, now_ms=0)
    assert window_times(engine, 1, "{payeeId=1}") == [MIN, 2 * MIN]  # no cleanup() yet


def test_seen_ids_live_as_long_as_the_late_retention():
    engine = make(alert_on_late=True, late_retention_ms=5 * MIN)
    engine.on_rule(count_rule(1, limit=0, minutes=1), 0)
    engine.on_transaction(txn(1, 0), 0, 0)
    engine.cleanup(5 * MIN)
    assert engine.store.seen == {"1": 0}
    assert fired(engine.on_transaction(txn(1, 0), 5 * MIN, 0)) == []  # still recognised
    engine.cleanup(5 * MIN + 1)
    assert engine.store.seen == {}
    # beyond the retention a redelivery is a late dead letter: it neither counts nor alerts
    (letter,) = engine.on_transaction(txn(1, 0), 5 * MIN + 1, 0)
    assert (letter.kind, letter.data["reason"]) == ("dead_letter", "late")
    assert engine.counters["duplicates"] == 1


def test_late_transactions_enter_rules_added_after_the_last_cleanup():
    engine = make()
    engine.cleanup(10 * MIN)  # no rule: the seen-id horizon is the watermark
    engine.on_rule(count_rule(limit=1, minutes=5), 0)
    engine.on_transaction(txn(1, 9 * MIN), 10 * MIN, 0)  # late, behind the old horizon
    assert fired(engine.on_transaction(txn(2, 10 * MIN), 10 * MIN, 0)) == [
        (1, "{payeeId=1}", "2")
    ]


def test_next_cleanup_is_when_the_oldest_entry_leaves_rounded_up_to_the_second():
    engine = make(late_retention_ms=0)
    engine.on_rule(count_rule(minutes=1), 0)
    assert engine.next_cleanup_ms(0) is None
    engine.on_transaction(txn(1, 1_500), 0, 0)
    # its id leaves once the transaction is beyond the (zero) late retention
    assert engine.next_cleanup_ms(0) == 2_000
    engine.cleanup(2_000)
    assert engine.store.seen == {}
    # the entry at 1 500 is outside every window ending at or after 61 501
    assert engine.next_cleanup_ms(2_000) == 62_000
    engine.cleanup(61_500)
    assert window_times(engine, 1, "{payeeId=1}") == [1_500]
    assert engine.next_cleanup_ms(61_500) == 62_000
    engine.cleanup(62_000)
    assert engine.store.window_count() == 0
    assert engine.next_cleanup_ms(62_000) is None


def test_a_rule_update_makes_cleanup_due_at_once():
    engine = make(late_retention_ms=0)
    engine.on_rule(count_rule(minutes=10), 0)
    engine.on_transaction(txn(1, 0), 0, 0)
    engine.cleanup(MIN)
    assert engine.next_cleanup_ms(MIN) == 10 * MIN + 1000
    engine.on_rule(count_rule(minutes=0), 0)
    assert engine.next_cleanup_ms(MIN) == MIN + 1000


def test_late_retention_keeps_state_for_late_evaluations():
    engine = make(alert_on_late=True, late_retention_ms=MIN)
    engine.on_rule(count_rule(limit=1, minutes=1), 0)
    engine.on_transaction(txn(1, 0), 0, 0)
    engine.cleanup(MIN + 1)  # without the retention the entry at 0 would go
    assert fired(engine.on_transaction(txn(2, MIN // 2), MIN + 1, 0)) == [(1, "{payeeId=1}", "2")]


def test_rules_and_windows_survive_a_restart_on_the_same_store():
    store = MemoryStore(pickled=True)
    engine = FraudEngine(store)
    engine.on_rule(count_rule(limit=1), 0)
    engine.on_transaction(txn(1, 0), 0, 0)
    restarted = FraudEngine(store)
    assert [r.rule_id for r in restarted.rules()] == [1]
    assert fired(restarted.on_transaction(txn(2, 1), 0, 0)) == [(1, "{payeeId=1}", "2")]
    assert [o.kind for o in restarted.on_transaction(txn(1, 0), 0, 0)] == ["dropped"]  # redelivery


def test_a_store_written_in_another_mode_loses_its_windows_but_not_its_rules():
    store = MemoryStore()
    engine = FraudEngine(store)
    engine.on_rule(count_rule(limit=1), 0)
    engine.on_transaction(txn(1, 0), 0, 0)
    bucketed = FraudEngine(store, bucket_ms=1000)
    assert store.window_count() == 0
    assert [r.rule_id for r in bucketed.rules()] == [1]


# -- bucket mode ----------------------------------------------------------------------------
def test_bucket_mode_floors_event_times_and_window_starts():
    feed = Feed(make(bucket_ms=10_000))
    feed.rule(count_rule(limit=1, minutes=1))
    assert feed.pay(5_000, payee=1) == []
    # the exact window [9 999, 69 999] misses 5 000; floored to [0, 60 000] it holds bucket 0
    assert feed.pay(69_999, payee=1) == [(1, "{payeeId=1}", "2")]
    assert feed.pay(5_000, payee=2) == []
    assert feed.pay(70_000, payee=2) == []  # floored [10 000, 70 000]: bucket 0 is out
    # a later event time of the same bucket counts: T = 61 000 holds bucket [60 000, 70 000)
    assert feed.pay(64_000, payee=3) == []
    assert feed.pay(61_000, payee=3) == [(1, "{payeeId=3}", "2")]


def test_bucket_mode_keeps_one_partial_aggregate_per_bucket():
    engine = make(bucket_ms=60_000)
    engine.on_rule(rule(agg="AVG", op=">", limit=1000, minutes=60), 0)
    for i in range(600):  # 10 minutes of transactions, 1 a second
        engine.on_transaction(txn(i, i * 1000, amount=str(i)), 0, 0)
    state = engine.store.get_window(1, "{payeeId=1}")
    assert window_size(state) == 10
    assert state[2] == [60] * 10  # counts
    (alert,) = engine.on_transaction(txn("x", 600_000, amount="1000000"), 0, 0)
    total = Decimal(599 * 600 // 2 + 1_000_000)
    assert alert.data["aggregate"] == Context(prec=34).divide(total, Decimal(601))


def test_exact_mode_keeps_one_entry_per_value():
    engine = make()
    engine.on_rule(rule(minutes=60, limit=10**9), 0)
    for i in range(100):
        engine.on_transaction(txn(i, i * 1000, amount="1.5"), 0, 0)
    assert window_size(engine.store.get_window(1, "{payeeId=1}")) == 100


# -- running sums ----------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(6))
def test_running_sums_equal_adding_the_window_up_value_and_text(seed):
    """Long windows take SUM and AVG from running sums: after appends, out-of-order inserts
    and expiries, every result equals the plain sum of the window's values, text included."""
    from spark_jobs.fraud.core.aggregates import Aggregator, aggregate
    from spark_jobs.fraud.core.windows import RUNNING_SUMS_FROM

    rng = random.Random(seed)
    window, entries = ExactWindow(), []
    texts = ["30", "21.5", "0.125", "1E+2", "7.10", "-3.25", "1000000000000.01", "0"]
    now, used = 0, 0
    for step in range(600):
        now += rng.randint(0, 40)
        at = now - (rng.randint(0, 300) if rng.random() < 0.2 else 0)  # some out of order
        value = Decimal(rng.choice(texts))
        window.add(at, value)
        entries.append((at, value))
        if rng.random() < 0.05:
            earliest = now - rng.randint(200, 900)
            window.expire(earliest, 500)
            entries = [(t, v) for t, v in entries if t >= earliest - 500]
        end = now - rng.randint(0, 50)
        span = rng.choice([100, 500, 2_000])
        inside = [v for t, v in sorted(entries, key=lambda e: e[0]) if end - span <= t <= end]
        used += len(inside) >= RUNNING_SUMS_FROM
        for aggregator in (Aggregator.SUM, Aggregator.AVG):
            got = window.aggregate(aggregator, end, span)
            expected = aggregate(aggregator, inside)
            assert (str(got), got) == (str(expected), expected), (step, aggregator)
    assert used > 100  # the running sums were really exercised


@pytest.mark.parametrize("text", ["1E+3", "1.5E+2", "20"])
def test_running_sums_of_amounts_with_positive_exponents_read_like_the_plain_sum(text):
    """The plain sum starts from 0, so 20 entries of 1E+3 read 20000, not 2.0E+4."""
    from spark_jobs.fraud.core.aggregates import Aggregator, aggregate

    window = ExactWindow()
    values = [Decimal(text)] * 20
    for at, value in enumerate(values):
        window.add(at, value)
    for aggregator in (Aggregator.SUM, Aggregator.AVG):
        got, expected = window.aggregate(aggregator, 19, 100), aggregate(aggregator, values)
        assert (str(got), got) == (str(expected), expected)


@pytest.mark.parametrize("seed", range(4))
def test_a_grouping_key_is_written_as_json_writes_it(seed):
    """The alert's groupingKey without json.dumps when it needs no escape: the same text
    for keys with quotes, backslashes, controls, separators, surrogates, any plane."""
    rng = random.Random(seed)
    ranges = [(0x20, 0x7E), (0x00, 0x1F), (0x7F, 0xFF), (0x2028, 0x2029), (0xD800, 0xDFFF),
              (0x100, 0xFFFF), (0x10000, 0x10FFFF)]
    specials = ['"', "\\", "=", ";", "{", "}", " ", "\u00a0", "\ufeff"]
    for _ in range(3_000):
        parts = []
        for _ in range(rng.randint(0, 12)):
            if rng.random() < 0.2:
                parts.append(rng.choice(specials))
            else:
                low, high = rng.choice(ranges[:1] * 6 + ranges)
                parts.append(chr(rng.randint(low, high)))
        key = "{payeeId=" + "".join(parts) + "}"
        assert json_string(key) == json.dumps(key, ensure_ascii=False), repr(key)
