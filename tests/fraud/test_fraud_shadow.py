"""`tideline rules check` against a real broker and a fraud_rules run: generated traffic
(in order, a few late, a resetting rule) passes the check exactly; a deleted and a changed
alert in `fraud_alerts` fail it with a stored result, an alert and exit status 3."""

from __future__ import annotations

import argparse
import datetime
import json

import pytest

from spark_jobs.contracts.tables import TABLE_ALERTS, TABLE_FRAUD_ALERTS, TABLE_VALIDATION_RESULTS
from spark_jobs.contracts.topics import TOPIC_RULES, TOPIC_TRANSACTIONS
from spark_jobs.streaming.lake.delta import read_arrow

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
DAY = datetime.date(2026, 1, 1)
RULES = [
    {"ruleId": 1, "ruleState": "ACTIVE", "groupingKeyNames": ["payeeId"],
     "aggregateFieldName": "paymentAmount", "aggregatorFunctionType": "SUM",
     "limitOperatorType": "GREATER", "limit": 300, "windowMinutes": 2},
    {"ruleId": 2, "ruleState": "ACTIVE", "groupingKeyNames": ["beneficiaryId"],
     "aggregateFieldName": "COUNT_FLINK", "aggregatorFunctionType": "SUM",
     "limitOperatorType": ">=", "limit": 3, "windowMinutes": 1},
    {"ruleId": 3, "ruleState": "ACTIVE", "groupingKeyNames": ["payeeId", "beneficiaryId"],
     "aggregateFieldName": "COUNT_WITH_RESET_FLINK", "aggregatorFunctionType": "SUM",
     "limitOperatorType": ">=", "limit": 4, "windowMinutes": 1},
]


def _transaction(n: int, event_time: int) -> dict:
    return {"transactionId": n, "eventTime": event_time, "payeeId": 1 + n % 7,
            "beneficiaryId": 1 + n % 5, "paymentAmount": float(n % 97) + 0.25,
            "paymentType": "CSH"}


def _produce(settings, topic: str, messages: list[tuple[int, dict]]) -> None:
    """Keyed by payee, so the transactions spread over both partitions."""
    from spark_jobs.streaming.kafka.producer import make_producer, produce_all

    producer = make_producer(settings.kafka)
    produce_all(producer, topic, [str(m.get("payeeId", "r")) for _, m in messages],
                [json.dumps(m) for _, m in messages], [at for at, _ in messages])
    producer.flush(30)


@pytest.mark.integration
@pytest.mark.spark
@pytest.mark.kafka
@pytest.mark.parametrize("state", ["driver", "spark"])
def test_the_check_passes_on_the_jobs_alerts_and_fails_on_a_corrupted_table(
        own_broker, make_settings, run_now, state):
    from deltalake import DeltaTable

    from spark_jobs.catalog import system_topics
    from spark_jobs.fraud.commands import cmd_rules_check
    from spark_jobs.fraud.shadow.run import (
        RulesCheckFailed,
        check_day,
        committed_cut,
        compare_day,
        day_closed,
        expected_alerts,
    )
    from spark_jobs.streaming.kafka.topic_admin import ensure_topics

    settings = make_settings(own_broker, jobs={"trigger": "200ms",
                                               "max_records_per_trigger": 300},
                             fraud={"state": state})
    ensure_topics(settings.kafka, system_topics("fraud"), settings.kafka.partitions)
    _produce(settings, TOPIC_RULES, [(T0, rule) for rule in RULES])
    traffic = [(T0 + 1000 + 100 * n, _transaction(n, T0 + 1000 + 100 * n)) for n in range(1500)]
    # 131 s behind the newest eventTime (lateness 2 min), Kafka time in order: late or not,
    # depending on the batches
    late = [(T0 + 141_050 + n, _transaction(2000 + n, T0 + 10_000 + n)) for n in range(5)]
    tomorrow = T0 + 86_400_000 + 180_000  # moves the watermark past the day's end
    _produce(settings, TOPIC_TRANSACTIONS, traffic[:1400] + late + traffic[1400:]
             + [(tomorrow, _transaction(9999, tomorrow))])
    run_now(settings, "fraud_rules")
    # the driver-state query is stateless: Spark runs no batch without data to move the
    # watermark on, so the day closes with the next batch, as it does under live traffic
    _produce(settings, TOPIC_TRANSACTIONS, [(tomorrow + 1, _transaction(9998, tomorrow + 1))])
    run_now(settings, "fraud_rules")

    ready, why = day_closed(settings, DAY)
    assert ready, why
    report, replayed = compare_day(settings, DAY)
    assert report.agrees, report.as_dict()
    assert report.expected_alerts > 300 and replayed["transactions"] == 1507
    assert replayed["undecidable_evaluations"] >= 5 * len(RULES) - 5, "the late ones"
    summary = check_day(settings, DAY, "test-run")
    assert summary["match_rate"] == 1.0 and summary["success"]

    found = expected_alerts(settings, committed_cut(settings)).alerts
    deleted = next(a for a in found if a["rule_id"] == 1)
    changed = next(a for a in found if a["rule_id"] == 2)
    table = DeltaTable(settings.lake.table(TABLE_FRAUD_ALERTS))
    table.delete(f"rule_id = 1 AND transaction_id = '{deleted['transaction_id']}'")
    table.update(updates={"aggregate": "'999'"},
                 predicate=f"rule_id = 2 AND transaction_id = '{changed['transaction_id']}'")
    with pytest.raises(RulesCheckFailed) as failed:
        check_day(settings, DAY, "test-run-2", "http://airflow/run")
    bad = failed.value.report
    assert (bad.missing_in_streaming, bad.differing, bad.extra_in_streaming) == (1, 1, 0)
    assert bad.field_differences == {"grouping_key": 0, "aggregate": 1, "limit": 0}
    assert {(e.kind, e.rule_id) for e in bad.examples} == {("differs", 2),
                                                           ("missing_in_streaming", 1)}
    args = argparse.Namespace(date=DAY, run_id="test-run-3", run_url=None)
    assert cmd_rules_check(args, settings) == 3

    alerts = [a for a in read_arrow(settings.lake.table(TABLE_ALERTS)).to_pylist()
              if a["source"] == "fraud_rules_shadow"]
    assert len(alerts) == 2 and all("1 missing, 0 extra" in a["summary"] for a in alerts)
    assert sorted(str(a["run_url"]) for a in alerts) == ["None", "http://airflow/run"]
    results = read_arrow(settings.lake.table(TABLE_VALIDATION_RESULTS)).to_pylist()
    assert sorted((r["run_id"], r["case"], r["check"], r["success"]) for r in results) == [
        ("test-run", "fraud_rules", "alert_match_rate", True),
        ("test-run-2", "fraud_rules", "alert_match_rate", False),
        ("test-run-3", "fraud_rules", "alert_match_rate", False)]


@pytest.mark.integration
@pytest.mark.kafka
def test_without_topics_or_job_the_check_passes_with_nothing_compared(own_broker,
                                                                       make_settings):
    from spark_jobs.fraud.shadow.run import check_day, day_closed

    settings = make_settings(own_broker)
    assert day_closed(settings, DAY)[0], "a job that never ran has nothing pending"
    summary = check_day(settings, DAY, "empty-run")
    assert (summary["expected_alerts"], summary["streaming_alerts"], summary["match_rate"]) == (
        0, 0, 1.0)
    assert summary["job_never_committed"]


@pytest.mark.integration
@pytest.mark.kafka
def test_alerting_traffic_the_job_never_read_fails_the_check(own_broker, make_settings):
    from spark_jobs.fraud.shadow.run import RulesCheckFailed, check_day
    from spark_jobs.streaming.kafka.topic_admin import ensure_topics

    settings = make_settings(own_broker)
    ensure_topics(settings.kafka, (TOPIC_RULES, TOPIC_TRANSACTIONS), settings.kafka.partitions)
    _produce(settings, TOPIC_RULES, [(T0, RULES[1])])
    _produce(settings, TOPIC_TRANSACTIONS,
             [(T0 + n, _transaction(5 * n, T0 + n)) for n in range(4)])  # one beneficiary
    with pytest.raises(RulesCheckFailed) as failed:
        check_day(settings, DAY, "never-ran")
    assert (failed.value.report.expected_alerts, failed.value.report.streaming_alerts) == (2, 0)
