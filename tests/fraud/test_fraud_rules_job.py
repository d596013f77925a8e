"""fraud_rules through the real broker and Spark: alerts for the right keys only, a rule
update mid-stream, rules surviving a restart, invalid input on the side topics, no duplicates."""

from __future__ import annotations

import pytest
from helpers.jobs import kill_mid_stream
from helpers.topics import read_values, send
from reference.fraud_reference import reference_alerts

from spark_jobs.contracts.tables import TABLE_DEAD_LETTERS, TABLE_FRAUD_ALERTS
from spark_jobs.contracts.topics import (
    TOPIC_CURRENT_RULES,
    TOPIC_FRAUD_ALERTS,
    TOPIC_RULE_ERRORS,
    TOPIC_RULES,
    TOPIC_TRANSACTIONS,
)
from spark_jobs.streaming.lake.delta import read_arrow

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.kafka]

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


@pytest.mark.parametrize("state", ["driver", "spark"])
def test_alerts_rule_updates_restart_and_side_outputs(own_broker, make_settings, run_now, state):
    settings = make_settings(own_broker, fraud={"state": state})
    kafka = settings.kafka
    from spark_jobs.catalog import system_topics
    from spark_jobs.streaming.kafka.topic_admin import ensure_topics

    ensure_topics(kafka, system_topics("fraud"), kafka.partitions)
    every_payment = {**COUNT_BY_BENEFICIARY, "ruleId": 3, "groupingKeyNames": ["payeeId"],
                     "limitOperatorType": ">", "limit": 0}
    send(kafka, TOPIC_RULES, [(T0, SUM_BY_PAYEE), (T0, COUNT_BY_BENEFICIARY),
                              (T0, every_payment), (T0 + 1, "{not json"),
                              (T0 + 2, {**SUM_BY_PAYEE, "ruleId": "x"}),
                              # paused between the 2nd and 3rd transaction, in the same batch
                              (T0 + 25_000, {**every_payment, "ruleState": "PAUSE"})])
    first = [tx(1, 10, 1, 9, 60), tx(2, 20, 1, 9, 50), tx(3, 30, 2, 9, 10)]
    redelivered = (T0 + 36_000, tx(2, 20, 1, 9, 50)[1])  # sent again later, same event
    bad_time = '{"transactionId": 98, "eventTime": "soon", "payeeId": 1}'  # no ANSI cast crash
    far = '{"transactionId": 97, "eventTime": 1000000000000000000, "payeeId": 1}'  # no crash
    send(kafka, TOPIC_TRANSACTIONS, [*first, (T0 + 35_000, "garbage"), (T0 + 35_001, bad_time),
                                     (T0 + 35_002, far), redelivered])
    run_now(settings, "fraud_rules")

    from spark_jobs.streaming.checkpoint import committed_watermark_ms

    assert committed_watermark_ms(settings.lake.checkpoint("fraud_rules")) > T0 - 120_000, \
        "the watermark moves (stateless driver queries too), so lateness can be judged"
    alerts = sorted(read_values(kafka, TOPIC_FRAUD_ALERTS),
                    key=lambda a: (a["ruleId"], a["triggeringEvent"]["transactionId"]))
    assert [(a["ruleId"], a["groupingKey"], a["triggeringEvent"]["transactionId"])
            for a in alerts] == [(1, "{payeeId=1}", 2), (2, "{beneficiaryId=9}", 3),
                                 (3, "{payeeId=1}", 1), (3, "{payeeId=1}", 2)]
    alerts = alerts[:2]
    assert (alerts[0]["aggregate"], alerts[0]["limit"]) == (110, 100)
    assert alerts[1]["aggregate"] == 3
    errors = read_values(kafka, TOPIC_RULE_ERRORS)
    # rule errors have no key, so they may land on either partition: compare as a set
    rules = sorted(e["rule"] for e in errors)
    assert len(rules) == 2, "each invalid rule once, not once per shard"
    assert rules[0].startswith('{"ruleId": "x"') and rules[1] == "{not json"
    dead = read_arrow(settings.lake.table(TABLE_DEAD_LETTERS)).to_pylist()
    assert sorted((d["raw_value"], d["reason"]) for d in dead) == sorted([
        ("garbage", "malformed"), (bad_time, "malformed"), (far, "malformed")]), \
        "an eventTime beyond the year 9999 is no epoch time (timers would overflow)"

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
        (1, 2), (2, 3), (2, 6), (3, 1), (3, 2)], \
        "rule 2 survived the restart; rule 1's new limit holds; rule 3 stays paused"
    assert alerts[2]["aggregate"] == 4
    exported = read_values(kafka, TOPIC_CURRENT_RULES)
    assert [(r["ruleId"], r["ruleState"], r["limit"]) for r in exported] == [
        (1, "ACTIVE", 1000), (2, "ACTIVE", 3), (3, "PAUSE", 0)]
    table = read_arrow(settings.lake.table(TABLE_FRAUD_ALERTS)).to_pylist()
    assert sorted((r["rule_id"], r["transaction_id"], r["aggregate"]) for r in table) == [
        (1, "2", "110"), (2, "3", "3"), (2, "6", "4"), (3, "1", "1"), (3, "2", "2")]


def traffic(first_id: int, count: int, start_s: float) -> list[tuple[int, dict]]:
    """Deterministic transactions, one every 100 ms of event (and Kafka) time."""
    return [
        (T0 + int((start_s + k / 10) * 1000),
         {"transactionId": first_id + k, "eventTime": T0 + int((start_s + k / 10) * 1000),
          "payeeId": 1 + (first_id + k) % 7, "beneficiaryId": 1 + (first_id + k) % 5,
          "paymentAmount": float((first_id + k) % 97) + 0.25, "paymentType": "CSH"})
        for k in range(count)
    ]


def test_a_killed_job_resumes_without_duplicate_alerts(own_broker, make_settings, run_now,
                                                       tmp_path):
    """With the engine's state in Spark (shards); the engine in the driver (the default) is
    killed three times at seeded moments in tests/fraud/test_fraud_chaos.py."""
    from spark_jobs.catalog import system_topics
    from spark_jobs.streaming.kafka.topic_admin import ensure_topics

    settings = make_settings(own_broker, jobs={"trigger": "200ms",
                                               "max_records_per_trigger": 300,
                                               "compact_every_batches": 2},  # in the background
                             fraud={"state": "spark", "snapshot_every": 3})
    kafka = settings.kafka
    ensure_topics(kafka, system_topics("fraud"), kafka.partitions)
    rules = [(T0, SUM_BY_PAYEE), (T0, COUNT_BY_BENEFICIARY)]
    send(kafka, TOPIC_RULES, rules)
    before, after = traffic(1, 1500, 1.0), traffic(1501, 500, 200.0)
    send(kafka, TOPIC_TRANSACTIONS, before)

    kill_mid_stream(settings, "fraud_rules", 2, tmp_path)
    send(kafka, TOPIC_TRANSACTIONS, after)
    run_now(settings, "fraud_rules")  # resumes from the checkpoint

    table = read_arrow(settings.lake.table(TABLE_FRAUD_ALERTS)).to_pylist()
    stored = sorted((r["rule_id"], r["grouping_key"], r["transaction_id"], r["aggregate"])
                    for r in table)
    expected = reference_alerts(rules, before + after)
    assert len(expected) > 100
    assert stored == expected, "every alert exactly once, as the contract computes it"
    published = read_values(kafka, TOPIC_FRAUD_ALERTS)
    keys = {(a["ruleId"], str(a["triggeringEvent"]["transactionId"])) for a in published}
    assert keys == {(r, t) for r, _, t, _ in expected}, "the topic has every alert"


def test_cleanup_timers_drop_state_the_windows_no_longer_need(own_broker, make_settings,
                                                              run_now, spark):
    from spark_jobs.catalog import system_topics
    from spark_jobs.fraud.processors.shard_state import read_shards
    from spark_jobs.streaming.kafka.topic_admin import ensure_topics

    settings = make_settings(own_broker, fraud={"lateness": "1s", "state": "spark",
                                                "late_retention": "1m"},
                             jobs={"max_records_per_trigger": 100})
    kafka = settings.kafka
    ensure_topics(kafka, system_topics("fraud"), kafka.partitions)
    one_minute = {**SUM_BY_PAYEE, "groupingKeyNames": ["transactionId"], "windowMinutes": 1,
                  "limit": 10**9}
    send(kafka, TOPIC_RULES, [(T0, one_minute)])
    # 600 keys in the first 60 s, then 10 minutes of sparse traffic moving the watermark on
    send(kafka, TOPIC_TRANSACTIONS, traffic(1, 600, 1.0))
    run_now(settings, "fraud_rules")

    def stored() -> tuple[int, int]:
        shards = read_shards(spark, settings.lake.checkpoint("fraud_rules")).values()
        return (sum(s.store.window_count() for s in shards),
                sum(len(s.store.seen) for s in shards))

    windows, seen = stored()
    assert (windows, seen) == (600, 1200), "a window per key, every shard keeps every id"
    send(kafka, TOPIC_TRANSACTIONS, [
        (at + 60_000 * k, {**message, "transactionId": 10_000 + k,
                           "eventTime": message["eventTime"] + 60_000 * k})
        for k, (at, message) in enumerate(traffic(0, 10, 60.0), start=1)])
    run_now(settings, "fraud_rules")
    windows, seen = stored()
    assert windows + seen < 100, f"expired windows and ids are gone at the end: {windows, seen}"
    assert read_values(kafka, TOPIC_FRAUD_ALERTS) == []


def test_shard_keys_land_in_the_partitions_spark_puts_them(spark):
    """The pure murmur3 of shard_placement is Spark's: each shard really gets its own task."""
    from pyspark.sql import functions as F

    from spark_jobs.fraud.processors.shard_placement import murmur3_int, shard_keys

    rows = spark.range(-40, 40).select(F.col("id").cast("int").alias("v")) \
        .select("v", F.hash("v").alias("h")).collect()
    assert all(r.h == murmur3_int(r.v) for r in rows)
    keys = shard_keys(2, 2)
    placed = spark.createDataFrame([(k,) for k in keys], "shard int").repartition(2, "shard") \
        .select("shard", F.spark_partition_id().alias("p")).collect()
    assert sorted(r.p for r in placed) == [0, 1]
