"""The fraud engine against a brute-force reference of CONTRACTS.md section 7, on seeded random
streams shaped like production's: the production late retention (1h) and small ones, rule
updates that widen and narrow windows, change the aggregated field or the key, pause,
delete and clear, transactions on time, late within `fraud.late_retention` and beyond it
(also exactly at its edge), redeliveries soon and long after, clean-ups at random moments and
engines rebuilt on the same store between batches (as the Spark shards do every batch).

The reference restates the contract naively: it keeps every transaction that entered the
windows, in arrival order, and recomputes each window from that list. Retention is the
contract's sentence taken literally: at every input, for every rule, an entry is gone once
the watermark has passed eventTime + windowMinutes + late_retention with the rule's width of
that moment; nothing is ever physically dropped, only marked gone by a per-rule cut.
"""

from __future__ import annotations

import json
import pickle
import random
from dataclasses import dataclass, field
from decimal import Context, Decimal
from typing import Any

import pytest

from spark_jobs.fraud.core.engine import FraudEngine, MemoryStore, Output
from spark_jobs.fraud.core.windows import window_size

MIN = 60_000
HOUR = 60 * MIN
T0 = 1_767_225_600_000
AVG = Context(prec=34)
GONE = -(10**18)

Result = tuple[Any, ...]  # ("alert", ruleId, key, aggregate text) or ("dead", reason)


@dataclass
class RefRule:
    spec: dict[str, Any]
    since: int  # arrival number from which the rule sees transactions
    cut: int = GONE  # entries with (floored) eventTime before this are gone
    resets: dict[str, int] = field(default_factory=dict)

    @property
    def width(self) -> int:
        return self.spec["windowMinutes"] * MIN


class Reference:
    """Section 7 restated: every window recomputed from the full list of admitted arrivals."""

    def __init__(self, alert_on_late: bool, bucket_ms: int, retention: int) -> None:
        self.alert_on_late = alert_on_late
        self.span = max(bucket_ms, 1)
        self.retention = retention
        self.rules: dict[int, RefRule] = {}
        self.arrivals: list[dict[str, Any]] = []  # transactions that entered the windows
        self.ids: set[Any] = set()  # redeliveries are identical here: ids are never forgotten

    def floor(self, t: int) -> int:
        return t - t % self.span

    def age(self, watermark: int) -> None:
        """The retention sentence: entries past eventTime + width + retention are gone."""
        for ref in self.rules.values():
            ref.cut = max(ref.cut, watermark - ref.width - self.retention)

    def on_rule(self, spec: dict[str, Any], watermark: int) -> None:
        self.age(watermark)
        if spec["ruleState"] == "CONTROL":
            for ref in self.rules.values():  # CLEAR_STATE_ALL (the only control generated)
                ref.since, ref.cut, ref.resets = len(self.arrivals), GONE, {}
            return
        rule_id = spec["ruleId"]
        if spec["ruleState"] == "DELETE":
            self.rules.pop(rule_id, None)
            return
        old = self.rules.get(rule_id)
        if old is not None and all(old.spec[name] == spec[name]
                                   for name in ("groupingKeyNames", "aggregateFieldName")):
            old.spec = spec  # state kept: what is gone under the old width stays gone
        else:
            self.rules[rule_id] = RefRule(spec, since=len(self.arrivals))
        self.age(watermark)  # a narrower window: its entries go at once

    def key(self, fields: dict[str, Any], names: list[str]) -> str:
        return "{" + ";".join(f"{n}={fields.get(n, 'null')}" for n in names) + "}"

    def value(self, fields: dict[str, Any], name: str) -> Decimal | None:
        if name.startswith("COUNT"):
            return Decimal(1)
        value = fields.get(name)
        return Decimal(value) if isinstance(value, str) and value[0].isdigit() else None

    def on_transaction(self, fields: dict[str, Any], watermark: int) -> list[Result]:
        self.age(watermark)
        now = fields["eventTime"]
        if now < watermark - self.retention:
            return [("dead", "late")]
        if fields["transactionId"] in self.ids:
            return []
        self.ids.add(fields["transactionId"])
        number = len(self.arrivals)
        self.arrivals.append(fields)
        if now < watermark and not self.alert_on_late:
            return []
        results: list[Result] = []
        for rule_id in sorted(self.rules):
            ref = self.rules[rule_id]
            spec = ref.spec
            if spec["ruleState"] != "ACTIVE":
                continue
            key = self.key(fields, spec["groupingKeyNames"])
            low = max(self.floor(now - ref.width), self.floor(ref.cut))
            values = [
                value
                for other in self.arrivals[max(ref.since, ref.resets.get(key, -1)):]
                if low <= self.floor(other["eventTime"]) <= self.floor(now)
                and self.key(other, spec["groupingKeyNames"]) == key
                and (value := self.value(other, spec["aggregateFieldName"])) is not None
            ]
            if not values:
                continue
            total = sum(values, Decimal(0))
            result = {"SUM": total, "AVG": AVG.divide(total, Decimal(len(values))),
                      "MIN": min(values), "MAX": max(values)}[spec["aggregatorFunctionType"]]
            limit = Decimal(spec["limit"])
            holds = {">": result > limit, "<": result < limit, "=": result == limit,
                     ">=": result >= limit, "<=": result <= limit,
                     "!=": result != limit}[spec["limitOperatorType"]]
            if holds:
                results.append(("alert", rule_id, key, str(result)))
                if spec["aggregateFieldName"] == "COUNT_WITH_RESET_FLINK":
                    ref.resets[key] = number + 1
        return results


def results(outputs: list[Output]) -> list[Result]:
    """Alerts and dead letters; a `dropped` output (a redelivery's count) is no result."""
    return [("alert", o.data["ruleId"], o.data["groupingKey"], str(o.data["aggregate"]))
            if o.kind == "alert" else ("dead", o.data["reason"]) for o in outputs
            if o.kind != "dropped"]


FIELDS = ["paymentAmount", "COUNT_FLINK", "COUNT_WITH_RESET_FLINK"]
KEYS = [["payeeId"], ["payeeId", "beneficiaryId"], ["beneficiaryId"], []]


def random_rule(rng: random.Random, rule_id: int, current: dict[str, Any] | None,
                most_minutes: int) -> dict[str, Any]:
    """A new rule, or an update of `current`: mostly keeping its key and field (state kept)
    with a window widened or narrowed, sometimes another field or key (starts empty)."""
    roll = rng.random()
    if current is None or roll < 0.2:
        keys, field_name = rng.choice(KEYS), rng.choice(FIELDS)
        minutes = rng.randint(0, most_minutes)
    else:
        keys, field_name = current["groupingKeyNames"], current["aggregateFieldName"]
        minutes = current["windowMinutes"]
        if roll < 0.35:
            field_name = rng.choice([f for f in FIELDS if f != field_name])
        if rng.random() < 0.7:  # widen (more often) or narrow
            minutes = rng.randint(minutes, minutes + most_minutes) if rng.random() < 0.65 \
                else rng.randint(0, minutes)
    counting = field_name.startswith("COUNT")
    return {
        "ruleId": rule_id,
        "ruleState": rng.choice(["ACTIVE", "ACTIVE", "ACTIVE", "PAUSE"]),
        "groupingKeyNames": keys,
        "aggregateFieldName": field_name,
        "aggregatorFunctionType": rng.choice(["SUM", "AVG", "MIN", "MAX"]),
        "limitOperatorType": rng.choice([">", "<", "=", ">=", "<=", "!="]),
        "limit": rng.randint(1, 6) if counting else rng.choice([5, 20, 50, 100, 250]),
        "windowMinutes": minutes,
    }


def transaction(rng: random.Random, number: int, event_time: int) -> bytes:
    fields: dict[str, Any] = {"transactionId": number, "eventTime": event_time,
                              "payeeId": rng.randint(1, 3)}
    if rng.random() < 0.8:
        fields["beneficiaryId"] = rng.randint(1, 2)
    text = json.dumps(fields)
    amount = rng.random()
    if amount < 0.85:
        text = text[:-1] + f', "paymentAmount": {rng.randint(0, 60)}.{rng.randint(0, 99):02d}}}'
    elif amount < 0.92:
        text = text[:-1] + ', "paymentAmount": "oops"}'
    return text.encode()


def decoded(raw: bytes) -> dict[str, Any]:
    """The transaction with its amount as its JSON text (None when not a number)."""
    fields = json.loads(raw)
    if isinstance(fields.get("paymentAmount"), float):
        fields["paymentAmount"] = raw.decode().rsplit(": ", 1)[1][:-1]
    elif "paymentAmount" in fields:
        fields["paymentAmount"] = None
    return fields


def event_time_of(rng: random.Random, clock: int, watermark: int, lateness: int,
                  retention: int) -> int:
    """Mostly within the lateness of the clock; else late within the retention, at its very
    edge, or beyond it."""
    roll = rng.random()
    if roll < 0.7:
        return clock - rng.randint(0, lateness)
    if roll < 0.85:
        return watermark - rng.randint(0, retention)
    if roll < 0.92:
        return watermark - retention + rng.choice([-1, 0, 1])
    return watermark - retention - rng.randint(1, retention + 10 * MIN)


@dataclass(frozen=True)
class Run:
    seed: int
    retention: int
    alert_on_late: bool = False
    bucket_ms: int = 0
    lateness: int = 20_000
    steps: int = 400


def run_random(run: Run) -> list[list[Result]]:
    """Feed one random stream to the engine and the reference; return the engine's results."""
    rng = random.Random(run.seed)
    retention = run.retention
    # time runs so that the run spans several retentions and windows
    tick = max(15_000, (retention + run.lateness) // 40)
    most_minutes = max(2, tick // 12_000)

    def fresh(store: MemoryStore) -> FraudEngine:
        return FraudEngine(store, run.alert_on_late, run.bucket_ms, late_retention_ms=retention)

    engine = fresh(MemoryStore(pickled=run.seed % 2 == 0))
    reference = Reference(run.alert_on_late, run.bucket_ms, retention)
    specs: dict[int, dict[str, Any]] = {}
    sent: list[bytes] = []
    clock, watermark, newest = T0, T0 - run.lateness, None
    history: list[list[Result]] = []
    step = 0
    while step < run.steps:
        if rng.random() < 0.2:  # the Spark shards build an engine on their state every batch
            engine = fresh(engine.store)  # type: ignore[arg-type]
        for _ in range(rng.randint(1, 8)):
            step += 1
            roll = rng.random()
            if roll < 0.07:
                rule_id = rng.randint(1, 4)
                if rng.random() < 0.15:
                    spec = {"ruleId": rule_id, "ruleState": "DELETE"}
                    specs.pop(rule_id, None)
                elif rng.random() < 0.03:
                    spec = {"ruleState": "CONTROL", "controlType": "CLEAR_STATE_ALL"}
                else:
                    spec = random_rule(rng, rule_id, specs.get(rule_id), most_minutes)
                    specs[rule_id] = spec
                engine.on_rule(json.dumps(spec).encode(), clock, watermark)
                reference.on_rule(spec, watermark)
                continue
            if roll < 0.12 and sent:  # a redelivery: mostly soon after, sometimes long after
                raw = rng.choice(sent[-10:] if rng.random() < 0.7 else sent)
            else:
                clock += rng.randint(0, tick)
                at = event_time_of(rng, clock, watermark, run.lateness, retention)
                raw = transaction(rng, len(sent), at)
                sent.append(raw)
            fields = decoded(raw)
            got = results(engine.on_transaction(raw, watermark, clock))
            assert got == reference.on_transaction(fields, watermark), (run, step, raw)
            history.append(got)
            newest = fields["eventTime"] if newest is None else max(newest, fields["eventTime"])
        if newest is not None:  # Spark's watermark for the next batch
            watermark = max(watermark, newest - run.lateness)
        timer = engine.next_cleanup_ms(watermark)
        if timer is not None and (timer <= watermark or rng.random() < 0.3):
            check_cleanup_timer_is_not_early(engine, watermark)
            engine.cleanup(watermark)
    return history


def check_cleanup_timer_is_not_early(engine: FraudEngine, watermark: int) -> None:
    """On a copy of the state: once cleaned up, cleaning up again at a watermark before the
    announced timer drops nothing, and at the timer drops something."""
    store = engine.store
    assert isinstance(store, MemoryStore)
    copy = pickle.loads(pickle.dumps(store))
    twin = FraudEngine(copy, engine.alert_on_late, engine.bucket_ms,
                       late_retention_ms=engine.retention.ms)
    twin.cleanup(watermark)
    timer = twin.next_cleanup_ms(watermark)
    if timer is None:
        assert copy.window_count() == len(copy.seen) == 0
        return

    def size() -> tuple[int, int, int]:
        entries = sum(window_size(w) for _r, _k, w in copy.windows())
        return copy.window_count(), len(copy.seen), entries

    before = size()
    twin.cleanup(max(watermark, timer - 1000))
    assert size() == before
    twin.cleanup(timer)
    assert size() != before


def outcome_counts(history: list[list[Result]]) -> tuple[int, int]:
    alerts = sum(r[0] == "alert" for results_ in history for r in results_)
    dead = sum(r[0] == "dead" for results_ in history for r in results_)
    return alerts, dead


@pytest.mark.parametrize("seed", range(10))
def test_exact_engine_with_production_retention_matches_the_reference(seed):
    alerts, dead = outcome_counts(run_random(Run(seed, retention=HOUR, lateness=2 * MIN)))
    assert alerts > 20 and dead > 5, "both clauses exercised"


@pytest.mark.parametrize("seed", range(6))
def test_late_alerting_engine_with_production_retention_matches_the_reference(seed):
    run_random(Run(100 + seed, retention=HOUR, alert_on_late=True, lateness=2 * MIN))


@pytest.mark.parametrize("retention", [0, 1_000, 30_000, 3 * MIN])
@pytest.mark.parametrize("alert_on_late", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_engine_with_small_retentions_matches_the_reference(seed, alert_on_late, retention):
    run_random(Run(200 + seed, retention=retention, alert_on_late=alert_on_late))


@pytest.mark.parametrize(("seed", "bucket_ms", "retention"),
                         [(300, 1000, 30_000), (301, 7000, 0), (302, 60_000, 3 * MIN),
                          (303, 60_000, HOUR), (304, 7000, HOUR)])
@pytest.mark.parametrize("alert_on_late", [False, True])
def test_bucketed_engine_matches_the_floored_reference(seed, bucket_ms, retention,
                                                       alert_on_late):
    run_random(Run(seed, retention=retention, alert_on_late=alert_on_late,
                   bucket_ms=bucket_ms))


def test_one_millisecond_buckets_are_exact():
    assert run_random(Run(400, retention=30_000, bucket_ms=1)) == run_random(
        Run(400, retention=30_000))
