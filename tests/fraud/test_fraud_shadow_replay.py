"""The fraud check's replay: the watermark bound, and the property it exists for: whatever the
job's micro-batches were, the alerts of every evaluation the replay calls certain are exactly
the job's (the job simulated by the driver sink's own `evaluate`, batch by batch, with Spark's
watermark and the clean-up timers)."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pytest
from helpers.hostile import hostile_messages
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_jobs.contracts.json_gate import DEFAULT_MAX_MESSAGE_BYTES
from spark_jobs.contracts.records import MAX_TIME_MS
from spark_jobs.contracts.topics import TOPIC_RULES, TOPIC_TRANSACTIONS
from spark_jobs.fraud.core.engine import FraudEngine, MemoryStore
from spark_jobs.fraud.core.output_rows import KIND_RULE, KIND_TRANSACTION
from spark_jobs.fraud.jobs.engine_host import InputRow, evaluate_batch
from spark_jobs.fraud.shadow.compare import decidable
from spark_jobs.fraud.shadow.recompute import input_rows, replay
from spark_jobs.fraud.shadow.watermark import spark_event_time, watermark_bounds
from spark_jobs.settings import FraudSettings
from spark_jobs.streaming.kafka.json_fields import top_level_longs
from spark_jobs.streaming.kafka.topic_reader import Message

T0 = 1_767_225_600_000
LATENESS = 20_000


@pytest.mark.parametrize(("text", "expected"), [
    ('{"eventTime": 1767225600000}', 1767225600000),
    ('{"eventTime": "1767225600000"}', 1767225600000),  # a dead letter, yet Spark reads it
    ('{"eventTime": " 17 "}', 17),
    ('{"eventTime": "+12"}', 12),
    ('{"eventTime": 1.5e12}', None),
    ('{"eventTime": "12.9"}', None),
    ('{"eventTime": true}', None),
    ('{"eventTime": -5}', None),  # outside 0..MAX_TIME_MS: no watermark
    ('{"eventTime": 1000000000000000000}', None),
    ('{"a": {"eventTime": 3}}', None),
    ('[{"eventTime": 4}]', None),
    ('{"eventTime": 5, "eventTime": 9}', 9),  # Spark takes the first: the bound the larger
    (' {"eventTime":8} trailing', 8),  # not JSON to Python, read by Spark
    ("{'eventTime': 6}", 6),
    ("garbage", None),
    (None, None),
])
def test_the_event_time_the_watermark_reads(text: str | None, expected: int | None) -> None:
    assert spark_event_time(text) == expected


def _job_event_time(raw: bytes | str | None) -> int | None:
    """The eventTime the job's watermark takes now: its source's reading (json_fields), in
    the range with_event_time keeps."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    (found,) = top_level_longs(data, ("eventTime",), DEFAULT_MAX_MESSAGE_BYTES)
    return found if found is not None and 0 <= found <= MAX_TIME_MS else None


HOSTILE = hostile_messages(
    {"transactionId": 1, "eventTime": T0, "payeeId": 5, "paymentAmount": 2.5,
     "paymentType": "CRD"}, int_field="payeeId", string_field="paymentType",
    time_field="eventTime", number_field="paymentAmount")
_event_times = st.one_of(st.integers(-5, MAX_TIME_MS + 5), st.integers(),
                         st.text("0123456789+- ", max_size=14), st.floats(), st.booleans(),
                         st.none())


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["eventTime", "other", "eventtime"]), _event_times),
                max_size=4),
       st.sampled_from(["json", "spaced", "cut"]))
def test_the_bound_reads_every_event_time_the_job_reads(pairs, shape) -> None:
    """The shadow's reading (get_json_object's, as the job had it) finds, for any message,
    at least the eventTime the job's source now reads: one bound for data either read."""
    body = ",".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in pairs)
    text = {"json": "{" + body + "}", "spaced": "{ " + body.replace(":", ": ") + " }",
            "cut": "{" + body}[shape]
    for raw in (text, text.encode(), *(message for _, message, _ in HOSTILE)):
        job = _job_event_time(raw)
        if job is not None:
            bound = spark_event_time(raw)
            assert bound is not None and bound >= job


def _row(kind: str, stamp: int, value: Any, offset: int = 0) -> InputRow:
    text = value if isinstance(value, str) else json.dumps(value)
    topic = TOPIC_RULES if kind == KIND_RULE else TOPIC_TRANSACTIONS
    return InputRow(kind, text.encode(), topic, 0, offset, stamp, None)


def test_bounds_cover_every_record_up_to_the_same_kafka_time() -> None:
    rows = [
        _row(KIND_RULE, 5, {"ruleId": 1}),
        _row(KIND_TRANSACTION, 10, {"eventTime": 50_000}),
        _row(KIND_TRANSACTION, 10, {"eventTime": 90_000}),  # same Kafka time: maybe one batch
        _row(KIND_TRANSACTION, 11, {"eventTime": 1_000}),
        _row(KIND_RULE, 12, {"eventTime": 999_999}),  # rules carry no event time
    ]
    assert watermark_bounds(rows, LATENESS) == [0, 70_000, 70_000, 70_000, 70_000]
    assert watermark_bounds([], LATENESS) == []


RULES = {
    "sum": {"ruleId": 1, "ruleState": "ACTIVE", "groupingKeyNames": ["payeeId"],
            "aggregateFieldName": "paymentAmount", "aggregatorFunctionType": "SUM",
            "limitOperatorType": "GREATER", "limit": 150, "windowMinutes": 1},
    "reset": {"ruleId": 2, "ruleState": "ACTIVE", "groupingKeyNames": ["beneficiaryId"],
              "aggregateFieldName": "COUNT_WITH_RESET_FLINK", "aggregatorFunctionType": "SUM",
              "limitOperatorType": ">=", "limit": 4, "windowMinutes": 1},
    "count": {"ruleId": 3, "ruleState": "ACTIVE", "groupingKeyNames": ["payeeId", "beneficiaryId"],
              "aggregateFieldName": "COUNT_FLINK", "aggregatorFunctionType": "SUM",
              "limitOperatorType": ">", "limit": 1, "windowMinutes": 2},
}


def _rule_changes(rng: random.Random) -> list[tuple[int, dict[str, Any]]]:
    """(second, message): the three rules, then widenings, narrowings, pauses, a clear."""
    changes = [(0, RULES["sum"]), (0, RULES["reset"]), (1, RULES["count"]),
               (150, {**RULES["sum"], "windowMinutes": 3}),  # widened: state kept
               (200, {**RULES["count"], "ruleState": "PAUSE"}),
               (260, {**RULES["count"], "windowMinutes": 1}),  # narrowed, active again
               (330, {**RULES["reset"], "windowMinutes": 2}),
               (400, {**RULES["sum"], "groupingKeyNames": ["beneficiaryId"]})]  # starts empty
    if rng.random() < 0.5:
        changes.append((rng.randrange(100, 500), {"ruleState": "CONTROL",
                                                  "controlType": "CLEAR_STATE_ALL"}))
    return changes


def _traffic(seed: int, late_share: float, seconds: int = 540) -> list[Message | Any]:
    """Transactions about one a second over two partitions, event times trailing Kafka time a
    little or (late_share) far, some redelivered, some in equal Kafka milliseconds, some with
    an eventTime only Spark reads."""
    rng = random.Random(seed)
    rules = [Message(T0 + s * 1000, 0, i, b"r", json.dumps(m).encode())
             for i, (s, m) in enumerate(sorted(_rule_changes(rng), key=lambda c: c[0]))]
    sent: list[tuple[int, bytes]] = []
    stamp = T0
    for n in range(seconds):
        stamp += rng.choice((0, 300, 1000, 1700))
        if rng.random() < 0.04 and sent:
            sent.append((stamp, rng.choice(sent)[1]))  # redelivered
            continue
        behind = rng.randrange(0, 4 * LATENESS) if rng.random() < late_share else \
            rng.randrange(0, LATENESS // 2)
        event: dict[str, Any] = {
            "transactionId": n, "eventTime": stamp - behind, "payeeId": rng.randrange(1, 4),
            "beneficiaryId": rng.randrange(1, 4),
            "paymentAmount": round(rng.uniform(1, 60), 2), "paymentType": "CSH"}
        if rng.random() < 0.02 or n == seconds // 2:  # a dead letter; once far ahead
            event["eventTime"] = str(event["eventTime"] + (3 * LATENESS if n == seconds // 2
                                                            else 0))
        sent.append((stamp, json.dumps(event).encode()))
    counters = [0, 0]
    transactions = []
    for at, value in sent:
        partition = rng.randrange(2)
        transactions.append(Message(at, partition, counters[partition], b"k", value))
        counters[partition] += 1
    return [rules, transactions]


def _job_outputs(rows: Sequence[InputRow], fraud: FraudSettings, rng: random.Random
                 ) -> tuple[list[dict[str, Any]], set[tuple[str, int, int]]]:
    """The driver sink's evaluation over random batches cut between Kafka times, with the
    watermark Spark gives each batch (the newest eventTime of earlier batches - lateness):
    its alerts, and where its late dead letters (beyond fraud.late_retention) came from."""
    engine = FraudEngine(MemoryStore(), fraud.alert_on_late_events, fraud.bucket_ms,
                         late_retention_ms=fraud.late_retention_ms)
    cuts = sorted({i for i in rng.sample(range(1, len(rows)), len(rows) // 12)
                   if rows[i].kafka_timestamp != rows[i - 1].kafka_timestamp})
    watermark, alerts, late, cleanup_at = 0, [], set(), None
    for start, end in zip([0, *cuts], [*cuts, len(rows)], strict=True):
        batch = rows[start:end]
        table = pa.table({name: [getattr(r, name) for r in batch] for name in InputRow._fields})
        outputs, cleanup_at = evaluate_batch(engine, table, watermark, cleanup_at)
        out = outputs.to_pylist()
        alerts += [a for a in out if a["kind"] == "alert"]
        late |= {(d["topic"], d["partition"], d["offset"]) for d in out
                 if d["kind"] == "dead_letter" and d["reason"] == "late"}
        times = [t for r in batch if r.kind == KIND_TRANSACTION
                 and (t := _job_event_time(r.value)) is not None]
        if times:
            watermark = max(watermark, max(times) - fraud.lateness_ms)
    return alerts, late


def _job_alerts(rows: Sequence[InputRow], fraud: FraudSettings, rng: random.Random
                ) -> list[dict[str, Any]]:
    return _job_outputs(rows, fraud, rng)[0]


def _compared(rows: Sequence[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((r["rule_id"], r["transaction_id"], r["grouping_key"], r["aggregate"],
                   r["limit"], r["partition"], r["offset"]) for r in rows)


def _fired(alerts: Sequence[dict[str, Any]]) -> set[tuple[int, str, int, int]]:
    return {(a["rule_id"], a["topic"], a["partition"], a["offset"]) for a in alerts}


# fraud.late_retention per seed: production's, and ones the late traffic goes beyond
RETENTIONS = (3_600_000, 30_000, 0, 50_000)


@pytest.mark.parametrize("alert_on_late", [False, True])
@pytest.mark.parametrize("bucket_ms", [0, 7_000])
@pytest.mark.parametrize("seed", range(4))
def test_certain_alerts_are_the_jobs_whatever_the_batches(seed: int, bucket_ms: int,
                                                         alert_on_late: bool) -> None:
    fraud = FraudSettings(lateness_ms=LATENESS, alert_on_late_events=alert_on_late,
                          bucket_ms=bucket_ms, shards=1, late_retention_ms=RETENTIONS[seed])
    rows = input_rows(*_traffic(seed, late_share=0.08))
    for batching in range(2):
        job, late = _job_outputs(rows, fraud, random.Random(seed * 10 + batching))
        assert bool(late) == (fraud.late_retention_ms < 60_000), "late dead letters when due"
        expected = replay(rows, fraud, _fired(job), late)
        assert expected.transactions > 500 and expected.rules >= 8
        assert len(expected.alerts) > 100, "the rules fire often enough to test something"
        kept, left_out = decidable(job, expected.undecidable)
        assert _compared(kept) == _compared(expected.alerts)
        assert left_out < len(job) / 3


def test_in_order_traffic_under_unchanged_rules_leaves_nothing_out() -> None:
    fraud = FraudSettings(lateness_ms=LATENESS, alert_on_late_events=False, bucket_ms=0,
                          shards=1)
    rules, transactions = _traffic(3, late_share=0.0)
    first_rules = rules[:3]  # no widening later
    on_time = [m for m in transactions if b'"eventTime": "' not in m.value]  # no far future
    rows = input_rows(first_rules, on_time)
    job = _job_alerts(rows, fraud, random.Random(1))
    expected = replay(rows, fraud, _fired(job))
    # late only by the jitter (< lateness / 2): never behind the bound
    assert expected.undecidable == {}
    assert len(job) > 100 and _compared(job) == _compared(expected.alerts)


def test_a_late_transaction_is_left_out_not_expected() -> None:
    fraud = FraudSettings(lateness_ms=LATENESS, alert_on_late_events=False, bucket_ms=0,
                          shards=1)
    rule = Message(T0, 0, 0, None, json.dumps({**RULES["count"], "limit": 0}).encode())

    def tx(n: int, at: int, event_time: int) -> Message:
        value = {"transactionId": n, "eventTime": event_time, "payeeId": 1, "beneficiaryId": 1}
        return Message(at, 0, n, None, json.dumps(value).encode())

    found = replay(input_rows([rule], [tx(0, T0 + 1, T0 + 60_000),
                                       tx(1, T0 + 2, T0 + 1_000)]), fraud)
    assert [(a["transaction_id"], a["aggregate"]) for a in found.alerts] == [("0", "1")]
    assert found.undecidable == {(3, TOPIC_TRANSACTIONS, 0, 1): T0 + 1_000}, \
        "40 s behind the newest eventTime: late if the two were in different batches"
