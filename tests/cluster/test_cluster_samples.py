"""training_samples as an application on the standalone cluster, with a worker and its
executor SIGKILLed while it runs a task of the job and a new worker in its place: the lost
task is retried on the other executor, both stateful steps (the view de-duplication and the
per-user join) reload their state from the checkpoint, and the outputs still equal the
independent batch recomputation of its shadow check (samples/shadow: straight from the
topics, in the test session's local Spark: a second application on the cluster would cost
about a minute more and prove nothing the job's run does not), one sample per view, in the
table and on the topic, with no orphan written twice."""

from __future__ import annotations

import datetime
from collections import Counter
from pathlib import Path

import pytest
from helpers.samples_day import produce_closed_day
from pyspark.sql import SparkSession

from cluster.apps import (
    RECOVERY_FAILURES,
    failed_tasks,
    finish,
    log_text,
    lose_busy_worker,
    start_job,
    wait_for_batch,
)
from spark_jobs.cluster.daemons import wait_until
from spark_jobs.cluster.settings import ClusterSettings
from spark_jobs.cluster.standalone import alive_workers, master_status
from spark_jobs.contracts.tables import TABLE_ORPHAN_ENGAGEMENTS, TABLE_TRAINING_SAMPLES
from spark_jobs.contracts.topics import TOPIC_TRAINING_SAMPLES
from spark_jobs.samples.encoding.sample_avro import decode_sample
from spark_jobs.samples.shadow.run import compare_day
from spark_jobs.samples.traffic import SamplesTrafficSpec
from spark_jobs.settings import load_settings
from spark_jobs.streaming.kafka.topic_reader import read_all
from spark_jobs.streaming.lake.delta import read_arrow, table_exists

pytestmark = [pytest.mark.integration, pytest.mark.kafka, pytest.mark.e2e]

DAY = datetime.date(2026, 1, 1)
JOB = "training_samples"


def test_training_samples_on_the_cluster_survive_a_lost_worker_and_equal_the_recomputation(
        standalone_cluster: ClusterSettings, own_broker: str, tmp_path: Path,
        spark: SparkSession) -> None:
    settings = load_settings(environ={}, overrides={
        "kafka": {"bootstrap": own_broker}, "lake": {"root": str(tmp_path / "lake")},
        "samples": {"window": "20s", "lateness": "5s"},
        "jobs": {"max_records_per_trigger": 60},  # 617 records: a dozen batches
        "spark": {"master": standalone_cluster.master_url}})
    spec = SamplesTrafficSpec(users=100, posts=500, views_per_s=20, window_ms=20_000,
                              max_disorder_ms=4_000, seed=5)
    views = produce_closed_day(settings, spec, views=300)

    job = start_job(settings, JOB, tmp_path)
    wait_for_batch(settings, JOB, job, tmp_path, 1)
    lose_busy_worker(standalone_cluster, settings, JOB, job)
    finish(job, JOB, tmp_path)
    assert wait_until(lambda: len(alive_workers(master_status(standalone_cluster))) == 2, 90)

    stored = read_arrow(settings.lake.table(TABLE_TRAINING_SAMPLES)).to_pylist()
    assert sorted(s["sample_id"] for s in stored) == sorted(views), "one sample per view"
    assert sum(any(s["labels"].values()) for s in stored) > 30
    published = Counter(decode_sample(message.value)["sample_id"]
                        for message in read_all(settings.kafka, TOPIC_TRAINING_SAMPLES))
    assert published == Counter(views), "the topic has every sample once"
    orphans = settings.lake.table(TABLE_ORPHAN_ENGAGEMENTS)
    if table_exists(orphans):
        origins = Counter((o["topic"], o["partition"], o["offset"])
                          for o in read_arrow(orphans).to_pylist())
        assert max(origins.values()) == 1, "no orphan engagement written twice"
    report = compare_day(spark, settings, DAY)
    assert report.agrees and report.match_rate == 1.0, report.as_dict()
    assert report.batch_samples == report.streaming_samples == len(views)
    assert "Lost executor" in log_text(tmp_path, JOB)
    failed = set(failed_tasks(settings, JOB))
    assert "ExecutorLostFailure" in failed and failed <= RECOVERY_FAILURES, \
        "a task died with its worker (and was retried: the job ended well)"
    apps = {app["name"] for app in master_status(standalone_cluster)["completedapps"]}
    assert f"tideline-{JOB}" in apps
