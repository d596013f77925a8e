"""fraud_rules on hostile input through the real broker and Spark (CONTRACTS section 9): a
burst of every hostile kind of transaction and rule, a dozen transactions dated ten years
ahead, then normal traffic. The alerts are exactly those of the normal traffic alone; every
hostile transaction is in `dead_letters` with its reason and received bytes, every hostile
rule in `rule_errors`; the job never stops."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from helpers.hostile import TEN_YEARS_MS, hostile_messages
from helpers.topics import read_values

from spark_jobs.contracts.tables import TABLE_DEAD_LETTERS
from spark_jobs.contracts.topics import (
    TOPIC_FRAUD_ALERTS,
    TOPIC_RULE_ERRORS,
    TOPIC_RULES,
    TOPIC_TRANSACTIONS,
)
from spark_jobs.streaming.lake.delta import read_arrow

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.kafka]

T0 = 1_767_225_600_000
MAX_BYTES = 4096  # jobs.max_message_bytes here: the producer can send the huge message
TRANSACTION = {"transactionId": 1, "eventTime": T0, "payeeId": 1, "beneficiaryId": 2,
               "paymentAmount": 21.5, "paymentType": "CSH"}
RULE = {"ruleId": 1, "ruleState": "ACTIVE", "groupingKeyNames": ["payeeId"],
        "aggregateFieldName": "paymentAmount", "aggregatorFunctionType": "SUM",
        "limitOperatorType": ">", "limit": 20, "windowMinutes": 10}
RULES = [RULE, {**RULE, "ruleId": 2, "groupingKeyNames": ["beneficiaryId"],
                "aggregateFieldName": "COUNT_FLINK", "limitOperatorType": ">=", "limit": 3,
                "windowMinutes": 1}]


def send_raw(kafka, topic: str, messages: list[tuple[int, bytes | None]]) -> None:
    """Produce raw values (None: a null value) with chosen Kafka timestamps, in order."""
    from spark_jobs.streaming.kafka.producer import make_producer

    producer = make_producer(kafka)
    for at, value in messages:
        producer.produce(topic, value, b"k", timestamp=at)
    assert producer.flush(30) == 0


def normal_traffic() -> list[tuple[int, bytes]]:
    """Forty payments a second apart, from a minute after the hostile burst."""
    at = [T0 + 60_000 + k * 1000 for k in range(40)]
    return [(t, json.dumps({**TRANSACTION, "transactionId": 100 + k, "eventTime": t,
                            "payeeId": k % 3, "beneficiaryId": k % 2,
                            "paymentAmount": 4.25 + k % 5}).encode())
            for k, t in enumerate(at)]


def reference_alerts(rules: list[tuple[int, bytes]], payments: list[tuple[int, bytes]]
                     ) -> list[tuple[int, str, str, Decimal]]:
    """The pure engine over the normal messages alone, in arrival order (nothing is late)."""
    from spark_jobs.fraud.core.engine import FraudEngine, MemoryStore

    engine, found = FraudEngine(MemoryStore()), []
    arrivals = [(t, 0, m) for t, m in rules] + [(t, 1, m) for t, m in payments]
    for at, kind, raw in sorted(arrivals):
        outputs = engine.on_rule(raw, at) if kind == 0 else engine.on_transaction(raw, 0, at)
        found += [(o.data["ruleId"], o.data["groupingKey"],
                   str(o.data["triggeringEvent"]["transactionId"]), o.data["aggregate"])
                  for o in outputs if o.kind == "alert"]
    return sorted(found)


@pytest.mark.parametrize("state", ["driver", "spark"])
def test_hostile_burst_then_normal_traffic(own_broker, make_settings, run_now, state):
    from spark_jobs.catalog import system_topics
    from spark_jobs.streaming.kafka.topic_admin import ensure_topics

    settings = make_settings(own_broker, fraud={"state": state},
                             jobs={"max_message_bytes": MAX_BYTES})
    kafka = settings.kafka
    ensure_topics(kafka, system_topics("fraud"), kafka.partitions)
    bad_transactions = hostile_messages(
        TRANSACTION, int_field="transactionId", string_field="paymentType",
        time_field="eventTime", number_field="paymentAmount", max_message_bytes=MAX_BYTES)
    bad_transactions += [(f"ahead {k}", json.dumps(
        {**TRANSACTION, "transactionId": 50 + k, "eventTime": T0 + TEN_YEARS_MS + k}).encode(),
        "future") for k in range(12)]
    bad_rules = hostile_messages(RULE, int_field="ruleId", string_field="aggregateFieldName",
                                 time_field=None, number_field="limit",
                                 max_message_bytes=MAX_BYTES)
    send_raw(kafka, TOPIC_RULES, [(T0, m) for _, m, _ in bad_rules])
    send_raw(kafka, TOPIC_TRANSACTIONS, [(T0 + k, m) for k, (_, m, _) in
                                         enumerate(bad_transactions)])
    rules = [(T0 + 30_000, json.dumps(r).encode()) for r in RULES]
    payments = normal_traffic()
    send_raw(kafka, TOPIC_RULES, rules)
    send_raw(kafka, TOPIC_TRANSACTIONS, payments)
    run_now(settings, "fraud_rules")

    alerts = read_values(kafka, TOPIC_FRAUD_ALERTS)
    expected = reference_alerts(rules, payments)
    assert len(expected) > 10
    assert sorted((a["ruleId"], a["groupingKey"], str(a["triggeringEvent"]["transactionId"]),
                   Decimal(str(a["aggregate"]))) for a in alerts) == expected
    dead = [d for d in read_arrow(settings.lake.table(TABLE_DEAD_LETTERS)).to_pylist()
            if d["topic"] == TOPIC_TRANSACTIONS]
    found = sorted((d["offset"], d["reason"], d["raw_bytes"], d["raw_length"]) for d in dead)
    assert found == [(k, reason, m, None if m is None else len(m))
                     for k, (_, m, reason) in enumerate(bad_transactions)]
    assert all(d["detail"] for d in dead)
    errors = read_values(kafka, TOPIC_RULE_ERRORS)
    assert sorted(e["rule"] for e in errors) == sorted(
        (m or b"").decode("utf-8", "replace").strip() for _, m, _ in bad_rules)
    assert all(e["error"] for e in errors)
