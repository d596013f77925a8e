"""training_samples as an application on the standalone cluster equals the independent batch
recomputation of its shadow check (samples/shadow: straight from the topics, in the test
session's local Spark: a second application on the cluster would cost about a minute more
and prove nothing the job's run does not), one sample per view."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from helpers.samples_day import produce_closed_day
from pyspark.sql import SparkSession

from cluster.apps import run_job
from spark_jobs.cluster.settings import ClusterSettings
from spark_jobs.cluster.standalone import master_status
from spark_jobs.contracts.tables import TABLE_TRAINING_SAMPLES
from spark_jobs.samples.shadow.run import compare_day
from spark_jobs.samples.traffic import SamplesTrafficSpec
from spark_jobs.settings import load_settings
from spark_jobs.streaming.lake.delta import read_arrow

pytestmark = [pytest.mark.integration, pytest.mark.kafka, pytest.mark.e2e]

DAY = datetime.date(2026, 1, 1)
JOB = "training_samples"


def test_training_samples_on_the_cluster_equal_the_recomputation(
        standalone_cluster: ClusterSettings, own_broker: str, tmp_path: Path,
        spark: SparkSession) -> None:
    settings = load_settings(environ={}, overrides={
        "kafka": {"bootstrap": own_broker}, "lake": {"root": str(tmp_path / "lake")},
        "samples": {"window": "20s", "lateness": "5s"},
        "jobs": {"max_records_per_trigger": 400},  # 617 records: a few batches
        "spark": {"master": standalone_cluster.master_url}})
    spec = SamplesTrafficSpec(users=100, posts=500, views_per_s=20, window_ms=20_000,
                              max_disorder_ms=4_000, seed=5)
    views = produce_closed_day(settings, spec, views=300)

    run_job(settings, JOB, tmp_path)

    stored = read_arrow(settings.lake.table(TABLE_TRAINING_SAMPLES)).to_pylist()
    assert sorted(s["sample_id"] for s in stored) == sorted(views), "one sample per view"
    assert sum(any(s["labels"].values()) for s in stored) > 30
    report = compare_day(spark, settings, DAY)
    assert report.agrees and report.match_rate == 1.0, report.as_dict()
    assert report.batch_samples == report.streaming_samples == len(views)
    apps = {app["name"] for app in master_status(standalone_cluster)["completedapps"]}
    assert f"tideline-{JOB}" in apps
