"""Chaos: fraud_rules SIGKILLed at random moments (before its first commit, inside its
sink's writes, between batches), restarted each time from its checkpoint, ends with the
outputs of an uninterrupted run of the same seeded input (the `fraud_alerts` and
`dead_letters` tables, the alerts, rule_errors and current_rules topics): nothing lost,
nothing doubled. The alerts also agree with the shadow replay through the pure engine."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator

import pytest
from helpers.chaos import assert_same_outputs, assert_unique, chaos_run, job_outputs
from helpers.jobs import run_available_now

from spark_jobs.catalog import system_topics
from spark_jobs.contracts.topics import TOPIC_FRAUD_ALERTS, TOPIC_RULES, TOPIC_TRANSACTIONS
from spark_jobs.fraud.shadow.run import compare_day
from spark_jobs.local.broker import EmbeddedBroker
from spark_jobs.settings import Settings
from spark_jobs.streaming.kafka.producer import make_producer, produce_all
from spark_jobs.streaming.kafka.topic_admin import ensure_topics

pytestmark = [pytest.mark.chaos, pytest.mark.e2e, pytest.mark.spark, pytest.mark.kafka]

T0 = 1_767_225_600_000  # 2026-01-01
DAY = datetime.date(2026, 1, 1)
SECTIONS = {
    # small triggers: five batches, so that three kills and the end fit
    "jobs": {"trigger": "200ms", "max_records_per_trigger": 250, "compact_every_batches": 2},
    "fraud": {"snapshot_every": 2},  # engine snapshots and change files both in play
    "spark": {"master": "local[2]"},
}
RULES = [
    {"ruleId": 1, "ruleState": "ACTIVE", "groupingKeyNames": ["payeeId"],
     "aggregateFieldName": "paymentAmount", "aggregatorFunctionType": "SUM",
     "limitOperatorType": "GREATER", "limit": 300, "windowMinutes": 1},
    {"ruleId": 2, "ruleState": "ACTIVE", "groupingKeyNames": ["beneficiaryId"],
     "aggregateFieldName": "COUNT_FLINK", "aggregatorFunctionType": "SUM",
     "limitOperatorType": ">=", "limit": 12, "windowMinutes": 1},
]


def _input() -> list[tuple[str, int, str]]:
    """(topic, Kafka timestamp = event time, value): the rules, 1,100 transactions one every
    100 ms, a few unusable ones, an invalid rule and rule exports on the way."""
    messages = [(TOPIC_RULES, T0, json.dumps(rule)) for rule in RULES]
    for k in range(1, 1101):
        at = T0 + 1000 + k * 100
        messages.append((TOPIC_TRANSACTIONS, at, json.dumps({
            "transactionId": k, "eventTime": at, "payeeId": 1 + k % 7,
            "beneficiaryId": 1 + k % 5, "paymentAmount": float(k % 97) + 0.25,
            "paymentType": "CSH"})))
        if k % 200 == 0:
            messages += [(TOPIC_TRANSACTIONS, at, f"garbage {k}"),
                         (TOPIC_RULES, at, json.dumps({**RULES[0], "ruleId": f"x{k}"})),
                         (TOPIC_RULES, at, '{"ruleState": "CONTROL", '
                                           '"controlType": "EXPORT_RULES_CURRENT"}')]
    return messages


def _prepare(settings: Settings) -> None:
    kafka = settings.kafka
    ensure_topics(kafka, system_topics("fraud"), kafka.partitions)
    producer = make_producer(kafka)
    messages = _input()
    for topic in (TOPIC_RULES, TOPIC_TRANSACTIONS):
        mine = [(at, value) for t, at, value in messages if t == topic]
        produce_all(producer, topic, ["k"] * len(mine), [v for _, v in mine],
                    [at for at, _ in mine])


@pytest.fixture
def reference_settings(make_settings) -> Iterator[Settings]:
    with EmbeddedBroker(port=0) as broker:
        # one batch: arrival order decides, micro-batch boundaries change nothing (section 7)
        settings = make_settings(broker.bootstrap, **{
            **SECTIONS, "jobs": {"max_records_per_trigger": 100_000}})
        _prepare(settings)
        yield settings


def test_fraud_rules_survives_random_kills(spark, own_broker, make_settings,
                                           reference_settings, tmp_path):
    settings = make_settings(own_broker, **SECTIONS)
    _prepare(settings)

    report = chaos_run(settings, "fraud_rules", tmp_path, seed=4, kills=3, timeout_s=600)

    assert {k.aim for k in report.kills} == {"startup", "sink_write", "between_batches"}
    run_available_now(spark, reference_settings, "fraud_rules")
    expected = job_outputs(reference_settings, "fraud_rules")
    actual = job_outputs(settings, "fraud_rules")
    assert sum(expected[f"topic {TOPIC_FRAUD_ALERTS}"].values()) > 100
    assert all(expected.values()), "every output has something to lose or double"
    assert_same_outputs(actual, expected)
    assert_unique(actual[f"topic {TOPIC_FRAUD_ALERTS}"], "alerts", lambda m: m[0])
    shadow, _ = compare_day(settings, DAY)
    assert shadow.agrees and shadow.duplicates_in_streaming == 0, shadow.as_dict()
