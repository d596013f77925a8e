"""The retention rule of CONTRACTS.md section 7, clause by clause, on the pure engine: a key's
entries are kept until the watermark passes eventTime + windowMinutes + fraud.late_retention;
a transaction up to the retention behind the watermark enters the windows and (with
alert_on_late_events) is evaluated over a complete window; one further behind is a `late`
dead letter that enters nothing; a widened window sees what the old width still kept; a
changed aggregated field starts empty; a pause keeps collecting; a delete forgets."""

from __future__ import annotations

import json
from typing import Any

import pytest

from spark_jobs.fraud.core.engine import FraudEngine, MemoryStore, Output
from spark_jobs.fraud.core.retention import DEFAULT_LATE_RETENTION_MS
from spark_jobs.fraud.core.windows import exact_entries
from spark_jobs.fraud.settings import FraudSettings
from spark_jobs.settings import load_settings

MIN = 60_000
HOUR = 60 * MIN
T0 = 1_767_225_600_000
KEY = "{payeeId=1}"


def count_rule(minutes: int, limit: int = 0, state: str = "ACTIVE",
               field: str = "COUNT_FLINK") -> bytes:
    """Alerts on every transaction (limit 0) with the count of the window: what it holds."""
    return json.dumps({"ruleId": 1, "ruleState": state, "groupingKeyNames": ["payeeId"],
                       "aggregateFieldName": field, "aggregatorFunctionType": "SUM",
                       "limitOperatorType": ">", "limit": limit,
                       "windowMinutes": minutes}).encode()


class Stream:
    """One engine, fed like the job: a watermark per batch, ids numbered."""

    def __init__(self, retention: int, alert_on_late: bool = True) -> None:
        self.engine = FraudEngine(MemoryStore(pickled=True), alert_on_late,
                                  late_retention_ms=retention)
        self.watermark = 0
        self.next_id = 0

    def rule(self, raw: bytes) -> None:
        assert self.engine.on_rule(raw, 0, T0 + self.watermark) == []

    def pay(self, at: int, **fields: Any) -> list[Output]:
        self.next_id += 1
        raw = json.dumps({"transactionId": self.next_id, "eventTime": T0 + at, "payeeId": 1,
                          **fields})
        return self.engine.on_transaction(raw, T0 + self.watermark, 0)

    def count(self, at: int) -> int | None:
        """The count the rule reports for a transaction at `at` (None: no alert)."""
        counts = [int(o.data["aggregate"]) for o in self.pay(at) if o.kind == "alert"]
        return counts[0] if counts else None

    def advance(self, watermark: int, cleanup: bool = True) -> None:
        self.watermark = watermark
        if cleanup:
            self.engine.cleanup(T0 + watermark)

    def entries(self) -> list[int]:
        state = self.engine.store.get_window(1, KEY)
        times = list(exact_entries(state)[0])
        return [t - T0 for t in times]


def test_the_default_retention_is_the_settings_default_of_one_hour():
    assert FraudSettings().late_retention_ms == DEFAULT_LATE_RETENTION_MS == HOUR
    engine = FraudEngine(MemoryStore())
    assert engine.retention.ms == HOUR
    settings = load_settings(environ={"TIDELINE_FRAUD__LATE_RETENTION": "5m"})
    assert settings.fraud.late_retention_ms == 5 * MIN


@pytest.mark.parametrize("cleanup", [True, False])
def test_an_entry_lives_until_the_watermark_passes_its_time_window_and_retention(cleanup):
    stream = Stream(retention=HOUR)
    stream.rule(count_rule(minutes=10))
    stream.pay(0)
    stream.advance(70 * MIN, cleanup)  # = 0 + 10 min + 1 h: not passed yet
    assert stream.entries() == [0]
    assert stream.count(10 * MIN) == 2, "the oldest admitted evaluation still sees it"
    stream.advance(70 * MIN + 1, cleanup)
    if cleanup:
        assert stream.entries() == [10 * MIN]
    assert stream.count(10 * MIN + 1) == 2  # the entry at 0 is outside its window anyway


@pytest.mark.parametrize("alert_on_late", [True, False])
def test_a_late_transaction_within_retention_counts_over_the_complete_window(alert_on_late):
    stream = Stream(retention=HOUR, alert_on_late=alert_on_late)
    stream.rule(count_rule(minutes=10))
    stream.pay(0)
    stream.pay(5 * MIN)
    stream.advance(65 * MIN)  # both are 65 and 60 minutes behind: the clean-up ran
    late = stream.count(8 * MIN)  # 57 minutes behind the watermark
    assert late == (3 if alert_on_late else None), "evaluated over [-2, 8] minutes, complete"
    assert stream.count(66 * MIN) == 1  # on time; the late ones are outside its window
    assert stream.count(10 * MIN) == (4 if alert_on_late else None), "the late one counted"


def test_exactly_the_retention_behind_is_admitted_and_one_millisecond_more_is_a_dead_letter():
    stream = Stream(retention=HOUR)
    stream.rule(count_rule(minutes=10))
    stream.advance(2 * HOUR)
    assert stream.count(HOUR) == 1
    (letter,) = stream.pay(HOUR - 1)
    assert (letter.kind, letter.data["reason"]) == ("dead_letter", "late")
    assert json.loads(letter.value)["eventTime"] == T0 + HOUR - 1, "the received text"
    assert stream.count(HOUR) == 2, "the dead letter entered no window"
    assert stream.engine.counters["beyond_retention"] == 1


def test_beyond_retention_even_without_rules_and_even_when_redelivered():
    stream = Stream(retention=MIN, alert_on_late=False)
    stream.pay(0)  # no rule: still remembered for redeliveries
    stream.advance(MIN, cleanup=False)
    engine = stream.engine
    (counted,) = engine.on_transaction(json.dumps({"transactionId": 1, "eventTime": T0}),
                                       T0 + MIN, 0)
    assert (counted.kind, counted.data["reason"]) == ("dropped", "duplicate"), \
        "a redelivery within retention is only counted"
    (letter,) = engine.on_transaction(json.dumps({"transactionId": 1, "eventTime": T0}),
                                      T0 + MIN + 1, 0)
    assert letter.data["reason"] == "late", "beyond it, whether or not its id is remembered"
    (letter,) = engine.on_transaction(json.dumps({"transactionId": 2, "eventTime": T0}),
                                      T0 + MIN + 1, 0)
    assert letter.data["reason"] == "late"


def test_a_zero_retention_dead_letters_every_late_transaction():
    stream = Stream(retention=0)
    stream.rule(count_rule(minutes=10))
    stream.advance(MIN)
    assert stream.count(MIN) == 1
    (letter,) = stream.pay(MIN - 1)
    assert letter.data["reason"] == "late"


@pytest.mark.parametrize("cleanup", [True, False])
def test_a_widened_window_sees_what_the_old_width_still_kept(cleanup):
    stream = Stream(retention=MIN)
    stream.rule(count_rule(minutes=1))
    for minute in range(10):
        stream.pay(minute * MIN)
    stream.advance(10 * MIN, cleanup)
    # kept under 1 minute + 1 minute of retention: entries at 8 and 9 minutes
    stream.rule(count_rule(minutes=30))
    assert stream.count(10 * MIN) == 3, "8, 9 and itself: older ones were gone, cleaned or not"
    stream.rule(count_rule(minutes=60))  # wider again, later: nothing comes back
    assert stream.count(10 * MIN) == 4


def test_a_narrowed_then_widened_window_sees_what_the_narrow_width_kept():
    stream = Stream(retention=MIN)
    stream.rule(count_rule(minutes=10))
    for minute in range(10):
        stream.pay(minute * MIN)
    stream.advance(9 * MIN, cleanup=False)
    stream.rule(count_rule(minutes=0))  # keeps >= 8 minutes from now on
    stream.advance(10 * MIN, cleanup=False)
    stream.rule(count_rule(minutes=10))  # the narrow width had dropped all before 9 minutes
    assert stream.count(10 * MIN) == 2


def test_the_horizon_of_a_widening_survives_a_rebuilt_engine():
    stream = Stream(retention=MIN)
    stream.rule(count_rule(minutes=1))
    for minute in range(10):
        stream.pay(minute * MIN)
    stream.advance(10 * MIN, cleanup=False)
    stream.rule(count_rule(minutes=30))
    stream.engine = FraudEngine(stream.engine.store, True, late_retention_ms=MIN)
    assert stream.count(10 * MIN) == 3


def test_a_widening_without_a_watermark_uses_the_newest_one_given():
    engine = FraudEngine(MemoryStore(), True, late_retention_ms=MIN)
    engine.on_rule(count_rule(minutes=1), 0)
    for minute in range(10):
        engine.on_transaction(json.dumps({"transactionId": minute, "eventTime": minute * MIN,
                                          "payeeId": 1}), 0, 0)
    engine.cleanup(10 * MIN)
    engine.on_rule(count_rule(minutes=30), 0)  # at 10 minutes, the newest watermark
    (alert,) = engine.on_transaction(json.dumps({"transactionId": 99, "eventTime": 10 * MIN,
                                                 "payeeId": 1}), 10 * MIN, 0)
    assert alert.data["aggregate"] == 3


@pytest.mark.parametrize(("before", "after"), [
    ("paymentAmount", "fee"),
    ("COUNT_FLINK", "COUNT_WITH_RESET_FLINK"),
    ("COUNT_WITH_RESET_FLINK", "COUNT_FLINK"),
    ("COUNT_FLINK", "paymentAmount"),
])
def test_an_update_of_the_aggregated_field_starts_empty_within_retention(before, after):
    stream = Stream(retention=HOUR)
    stream.rule(count_rule(minutes=10, limit=10**6, field=before))
    stream.pay(0, paymentAmount=5, fee=5)
    stream.pay(MIN, paymentAmount=5, fee=5)
    stream.rule(count_rule(minutes=60, field=after))  # widened too: still empty
    outputs = stream.pay(2 * MIN, paymentAmount=5, fee=5)
    assert [o.data["aggregate"] for o in outputs] == [1 if after.startswith("COUNT") else 5]


def test_a_paused_rule_keeps_collecting_under_the_same_retention():
    stream = Stream(retention=MIN)
    stream.rule(count_rule(minutes=2))
    stream.pay(0)
    stream.rule(count_rule(minutes=2, state="PAUSE"))
    assert stream.pay(MIN) == []
    stream.advance(2 * MIN)
    assert stream.pay(2 * MIN) == []
    stream.rule(count_rule(minutes=2))
    assert stream.count(2 * MIN) == 4, "the window covers the pause"
    stream.rule(count_rule(minutes=10, state="PAUSE"))  # widened while paused
    stream.advance(5 * MIN)
    stream.rule(count_rule(minutes=10))
    assert stream.count(5 * MIN) == 5, "kept: within 2 + 1 minutes of the watermark of 2"


def test_a_deleted_rule_forgets_its_entries_and_horizon():
    stream = Stream(retention=HOUR)
    stream.rule(count_rule(minutes=1))
    stream.pay(0)
    stream.advance(10 * MIN)
    stream.rule(count_rule(minutes=30))  # a horizon at 10 - 60 - 1 minutes
    stream.rule(json.dumps({"ruleId": 1, "ruleState": "DELETE"}).encode())
    assert stream.engine.store.window_count() == 0
    assert stream.engine.store.get_meta("horizons") == {}
    stream.rule(count_rule(minutes=30))
    assert stream.count(5 * MIN) == 1, "re-added: starts empty, though 0 is within retention"
    assert stream.count(6 * MIN) == 2
