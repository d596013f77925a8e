"""fraud_rules through the real broker and Spark, in both state modes: a late transaction within
`fraud.late_retention` counts over its complete window (one entry of it is older than the
watermark minus the window), one beyond the retention goes to `dead_letters` with reason
`late` and enters no window, and the shadow check agrees with the job."""

from __future__ import annotations

import datetime

import pytest
from helpers.topics import read_values, send

from spark_jobs.contracts.tables import TABLE_DEAD_LETTERS
from spark_jobs.contracts.topics import TOPIC_FRAUD_ALERTS, TOPIC_RULES, TOPIC_TRANSACTIONS
from spark_jobs.streaming.lake.delta import read_arrow

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.kafka]

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
S = 1000
MIN = 60 * S
COUNT_BY_PAYEE = {"ruleId": 1, "ruleState": "ACTIVE", "groupingKeyNames": ["payeeId"],
                  "aggregateFieldName": "COUNT_FLINK", "aggregatorFunctionType": "SUM",
                  "limitOperatorType": ">", "limit": 0, "windowMinutes": 5}


def tx(transaction_id: int, at: int, payee: int, sent: int | None = None
       ) -> tuple[int, dict]:
    """(Kafka time, transaction at T0 + at); sent late when `sent` is given."""
    return T0 + (at if sent is None else sent), {
        "transactionId": transaction_id, "eventTime": T0 + at, "payeeId": payee,
        "paymentAmount": 10}


@pytest.mark.parametrize("state", ["driver", "spark"])
def test_late_transactions_within_and_beyond_the_late_retention(own_broker, make_settings,
                                                                 run_now, state):
    from spark_jobs.catalog import system_topics
    from spark_jobs.fraud.shadow.run import compare_day
    from spark_jobs.streaming.kafka.topic_admin import ensure_topics

    settings = make_settings(own_broker, fraud={
        "state": state, "lateness": "1s", "late_retention": "1m", "alert_on_late_events": True})
    kafka = settings.kafka
    ensure_topics(kafka, system_topics("fraud"), kafka.partitions)
    send(kafka, TOPIC_RULES, [(T0, COUNT_BY_PAYEE)])
    send(kafka, TOPIC_TRANSACTIONS, [tx(1, 4 * MIN + 30 * S, payee=1), tx(2, 10 * MIN, payee=9)])
    run_now(settings, "fraud_rules")

    # the next batch's watermark is 10:00 - 1 s. 39 s behind it: the window [4:20, 9:20] holds
    # transaction 1, older than watermark - window (what a clean-up without retention trims)
    within = tx(3, 9 * MIN + 20 * S, payee=1, sent=10 * MIN + 1 * S)
    beyond = tx(4, 8 * MIN + 30 * S, payee=1, sent=10 * MIN + 2 * S)  # 89 s behind
    send(kafka, TOPIC_TRANSACTIONS, [within, beyond, tx(5, 10 * MIN + 5 * S, payee=1)])
    run_now(settings, "fraud_rules")

    alerts = read_values(kafka, TOPIC_FRAUD_ALERTS)
    counts = sorted((a["triggeringEvent"]["transactionId"], a["aggregate"]) for a in alerts)
    assert counts == [(1, 1), (2, 1), (3, 2), (5, 2)], \
        "3 counts 1 in its complete window; 5 counts 2, not 3: 4 entered no window"
    dead = read_arrow(settings.lake.table(TABLE_DEAD_LETTERS)).to_pylist()
    assert [(d["job"], d["topic"], d["reason"]) for d in dead] == [
        ("fraud_rules", TOPIC_TRANSACTIONS, "late")], "once, not once per shard"
    assert '"transactionId": 4' in dead[0]["raw_value"]

    report, replayed = compare_day(settings, datetime.date(2026, 1, 1))
    assert report.agrees and report.matched == 3, "the late evaluation is left out"
    assert replayed["undecidable_evaluations"] == 1
