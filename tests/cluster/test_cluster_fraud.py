"""fraud_rules with its scalable state (`fraud.state: spark`, transformWithStateInPandas
shards) as an application on the standalone cluster, with a worker and its executor SIGKILLed
while it runs a task of the job, and a new worker in its place: the lost task is retried on
the other executor, the shards' state is reloaded from the checkpoint (a surviving Python
worker's resident engine is brought forward), and the alerts are still exactly the pure
engine's, none lost, none doubled."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.topics import read_values
from reference.fraud_reference import reference_alerts

from cluster.apps import (
    RECOVERY_FAILURES,
    failed_tasks,
    finish,
    log_text,
    lose_busy_worker,
    start_job,
    wait_for_batch,
)
from spark_jobs.catalog import system_topics
from spark_jobs.cluster.daemons import wait_until
from spark_jobs.cluster.settings import ClusterSettings
from spark_jobs.cluster.standalone import alive_workers, master_status
from spark_jobs.contracts.tables import TABLE_DEAD_LETTERS, TABLE_FRAUD_ALERTS
from spark_jobs.contracts.topics import TOPIC_FRAUD_ALERTS, TOPIC_RULES, TOPIC_TRANSACTIONS
from spark_jobs.fraud.traffic import BENCHMARK_RULES, TransactionSpec, generate_transactions
from spark_jobs.settings import load_settings
from spark_jobs.streaming.kafka.producer import make_producer, produce_all
from spark_jobs.streaming.kafka.topic_admin import ensure_topics
from spark_jobs.streaming.lake.delta import read_arrow, table_exists

pytestmark = [pytest.mark.integration, pytest.mark.kafka, pytest.mark.e2e]

T0 = 1_767_225_600_000  # 2026-01-01
JOB = "fraud_rules"
# 1,200 payments at 20/s of event time among few accounts: four benchmark rules, two per
# shard (spend, pairs, big tickets, the resetting count), fire ~330 times
SPEC = TransactionSpec(payees=60, beneficiaries=4, seed=11)
RULES = [rule for rule in BENCHMARK_RULES if rule["ruleId"] in (1, 2, 7, 10)]


def test_fraud_rules_spark_state_survives_a_lost_worker_exactly(
        standalone_cluster: ClusterSettings, own_broker: str, tmp_path: Path) -> None:
    settings = load_settings(environ={}, overrides={
        "kafka": {"bootstrap": own_broker}, "lake": {"root": str(tmp_path / "lake")},
        "fraud": {"state": "spark", "shards": 2},
        "jobs": {"max_records_per_trigger": 100},  # a dozen batches: the kill lands mid-run
        "spark": {"master": standalone_cluster.master_url}})
    kafka = settings.kafka
    ensure_topics(kafka, system_topics("fraud"), kafka.partitions)
    rules = [(T0, rule) for rule in RULES]
    payments = [(t["eventTime"], t) for t in generate_transactions(
        SPEC, count=1200, start_ms=T0 + 1000, rate_per_s=20)]
    producer = make_producer(kafka)
    produce_all(producer, TOPIC_RULES, ["r"] * len(rules), [json.dumps(r) for _, r in rules],
                [at for at, _ in rules])
    produce_all(producer, TOPIC_TRANSACTIONS, [str(p["payeeId"]) for _, p in payments],
                [json.dumps(p) for _, p in payments], [at for at, _ in payments])

    folder = tmp_path
    job = start_job(settings, JOB, folder)
    wait_for_batch(settings, JOB, job, folder, 1)
    lose_busy_worker(standalone_cluster, settings, JOB, job)
    finish(job, JOB, folder)
    assert wait_until(lambda: len(alive_workers(master_status(standalone_cluster))) == 2, 90)

    expected = reference_alerts(rules, payments)
    assert len(expected) > 100 and {rule for rule, *_ in expected} == {1, 2, 7, 10}
    table = read_arrow(settings.lake.table(TABLE_FRAUD_ALERTS)).to_pylist()
    stored = sorted((r["rule_id"], r["grouping_key"], r["transaction_id"], r["aggregate"])
                    for r in table)
    assert stored == expected, "every alert exactly once, as the pure engine computes it"
    published = sorted((a["ruleId"], str(a["triggeringEvent"]["transactionId"]))
                       for a in read_values(kafka, TOPIC_FRAUD_ALERTS))
    assert published == sorted((r, t) for r, _, t, _ in expected), \
        "the topic has every alert once: a retried task publishes nothing twice"
    dead = settings.lake.table(TABLE_DEAD_LETTERS)
    assert not table_exists(dead) or read_arrow(dead).num_rows == 0, "nothing late or lost"
    assert "Lost executor" in log_text(folder, JOB)
    failed = set(failed_tasks(settings, JOB))
    assert "ExecutorLostFailure" in failed and failed <= RECOVERY_FAILURES, \
        "a task died with its worker (and was retried: the job ended well)"
    apps = {app["name"] for app in master_status(standalone_cluster)["completedapps"]}
    assert f"tideline-{JOB}" in apps
