"""fraud_rules through the real broker and Spark: alerts for the right keys only, a rule
update mid-stream, rules surviving a restart, invalid input on the side topics, no duplicates."""

from __future__ import annotations

import pytest
from helpers.topics import read_values, send

from spark_jobs.contracts import (
    TABLE_DEAD_LETTERS,
    TABLE_FRAUD_ALERTS,
    TOPIC_CURRENT_RULES,
    TOPIC_FRAUD_ALERTS,
    TOPIC_RULE_ERRORS,
    TOPIC_RULES,
    TOPIC_TRANSACTIONS,
)
from spark_jobs.lake.delta import read_arrow

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

T0 = 1_767_225_600_000
SUM_BY_PAYEE = {"ruleId": 1, "ruleState": "ACTIVE", "groupingKeyNames": ["payeeId"],
                "aggregateFieldName": "paymentAmount", "aggregatorFunctionType": "SUM",
                "limitOperatorType": "GREATER", "limit": 100, "windowMinutes": 10}
COUNT_BY_BENEFICIARY = {"ruleId": 2, "ruleState": "ACTIVE",
                        "groupingKeyNames": ["beneficiaryId"],
                        "aggregateFieldName": "COUNT_FLINK", "aggregatorFunctionType": "SUM",
                        "limitOperatorType": ">=", "limit": 3, "windowMinutes": 5}


def tx(transaction_id: int, seconds: int, payee: int, beneficiary: int, amount: float
       ) -> tuple[int, dict]:
    at = T0 + seconds * 1000
    return at, {"transactionId": transaction_id, "eventTime": at, "payeeId": payee,
                "beneficiaryId": beneficiary, "paymentAmount": amount, "paymentType": "CSH"}


def test_alerts_rule_updates_restart_and_side_outputs(own_broker, make_settings, run_now):
    settings = make_settings(own_broker)
    kafka = settings.kafka
    from spark_jobs.jobs.runner import JOBS
    from spark_jobs.kafka.admin import ensure_topics

    ensure_topics(kafka, JOBS["fraud_rules"].topics, kafka.partitions)
    send(kafka, TOPIC_RULES, [(T0, SUM_BY_PAYEE), (T0, COUNT_BY_BENEFICIARY),
                              (T0 + 1, "{not json")])
    first = [tx(1, 10, 1, 9, 60), tx(2, 20, 1, 9, 50), tx(3, 30, 2, 9, 10), tx(2, 20, 1, 9, 50)]
    send(kafka, TOPIC_TRANSACTIONS, [*first[:3], (T0 + 35_000, "garbage"), first[3]])
    run_now(settings, "fraud_rules")

    alerts = sorted(read_values(kafka, TOPIC_FRAUD_ALERTS), key=lambda a: a["ruleId"])
    assert [(a["ruleId"], a["groupingKey"], a["triggeringEvent"]["transactionId"])
            for a in alerts] == [(1, "{payeeId=1}", 2), (2, "{beneficiaryId=9}", 3)]
    assert (alerts[0]["aggregate"], alerts[0]["limit"]) == (110, 100)
    assert alerts[1]["aggregate"] == 3
    errors = read_values(kafka, TOPIC_RULE_ERRORS)
    assert len(errors) == 1 and errors[0]["rule"] == "{not json", "once, not once per shard"
    dead = read_arrow(settings.lake.table(TABLE_DEAD_LETTERS)).to_pylist()
    assert [d["raw_value"] for d in dead] == ["garbage"]

    # mid-stream update of rule 1 (same grouping: state kept, new limit), then a restart
    raised = {**SUM_BY_PAYEE, "limit": 1000}
    send(kafka, TOPIC_RULES, [(T0 + 40_000, raised),
                              (T0 + 60_000, {"ruleState": "CONTROL",
                                             "controlType": "EXPORT_RULES_CURRENT"})])
    send(kafka, TOPIC_TRANSACTIONS, [tx(5, 50, 1, 7, 10), tx(6, 55, 3, 9, 1)])
    run_now(settings, "fraud_rules")

    alerts = read_values(kafka, TOPIC_FRAUD_ALERTS)
    alerts.sort(key=lambda a: (a["ruleId"], a["triggeringEvent"]["transactionId"]))
    assert [(a["ruleId"], a["triggeringEvent"]["transactionId"]) for a in alerts] == [
        (1, 2), (2, 3), (2, 6)], "rule 2 survived the restart; rule 1's new limit holds"
    assert alerts[2]["aggregate"] == 4
    exported = read_values(kafka, TOPIC_CURRENT_RULES)
    assert [(r["ruleId"], r["limit"]) for r in exported] == [(1, 1000), (2, 3)]
    table = read_arrow(settings.lake.table(TABLE_FRAUD_ALERTS)).to_pylist()
    assert sorted((r["rule_id"], r["transaction_id"], r["aggregate"]) for r in table) == [
        (1, "2", "110"), (2, "3", "3"), (2, "6", "4")]
