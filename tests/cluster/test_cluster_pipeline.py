"""The metrics pipeline on a standalone cluster (2 workers of 1 core): the three jobs run as
users run them (`tideline job run ... --available-now` against the master) and the metrics
equal the pandas recomputation, with a worker and its executor SIGKILLed in the middle of
experiment_metrics and a new worker taking its place (one run proves both: it costs three
applications' start-up, the suite's budget allows one). The daily validation then runs on
that run's lake: the batch recomputation as a Spark application on the cluster, the checks
after it."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest
from reference.metrics_reference import experiment_metrics as reference_metrics

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
from spark_jobs.cluster.standalone import alive_workers, master_status, start_history
from spark_jobs.control.submit import submit_recompute
from spark_jobs.experiments.admin.metadata import add_ramps
from spark_jobs.experiments.admin.snapshot import publish_snapshot
from spark_jobs.experiments.core.periods import RampRow
from spark_jobs.experiments.traffic import DEFAULT_START_MS, TrafficSpec, generate, produce
from spark_jobs.experiments.validation.cases import CASES
from spark_jobs.experiments.validation.readiness import day_closed
from spark_jobs.experiments.validation.run import validate_day
from spark_jobs.experiments.validation.suites import DRIFT, MONOTONE
from spark_jobs.local.broker import EmbeddedBroker
from spark_jobs.settings import Settings, load_settings
from spark_jobs.streaming.application import read_application
from spark_jobs.streaming.checkpoint import batch_watermark_ms, last_committed_batch
from spark_jobs.streaming.lake.delta import read_arrow
from spark_jobs.streaming.settings import event_log_dir

pytestmark = [pytest.mark.integration, pytest.mark.kafka, pytest.mark.e2e]

HOUR = 3_600_000
KEY = ["experiment_hash", "experiment_group", "period_start", "event_type", "window_end"]
VALUES = ["is_control", "triggered_users", "volume", "propensity", "volume_sum_squares"]
EXPERIMENTS = {"period": "40m", "window": "5m", "lateness": "1m", "dedup_ttl": "1m",
               "cap_per_user_hour": 300}
JOBS = ("filter_events", "filter_activations", "experiment_metrics")
# 90 minutes before midnight: the run closes 2025-12-31 (its watermark passes midnight), so
# the daily validation has a whole day with the three cases' periods and re-ramps in it
START_MS = DEFAULT_START_MS - 90 * 60_000
DAY = datetime.date(2025, 12, 31)


def metrics(settings: Settings) -> pd.DataFrame:
    table = read_arrow(settings.lake.table("experiment_metrics")).to_pandas()
    return table[KEY + VALUES].sort_values(KEY).reset_index(drop=True)


@pytest.fixture(scope="module")
def traffic(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The generated input in a broker of its own (the module's filters write its topics)."""
    with EmbeddedBroker(port=0) as broker:
        root = tmp_path_factory.mktemp("cluster_pipeline")
        base = load_settings(environ={}, overrides={
            "experiments": EXPERIMENTS, "kafka": {"bootstrap": broker.bootstrap},
            "lake": {"root": str(root / "input")}})
        spec = TrafficSpec.from_settings(base.experiments, seed=17, start_ms=START_MS,
                                         duration_ms=2 * HOUR, n_users=150)
        produce(spec, base, progress=False)
        yield {"broker": broker, "root": root, "spec": spec, "records": list(generate(spec))}


def lake_settings(traffic: Any, cluster: ClusterSettings, name: str) -> Settings:
    """Settings of one run: its own lake (metadata, snapshot, tables, checkpoints)."""
    spec = traffic["spec"]
    settings = load_settings(environ={}, overrides={
        "experiments": EXPERIMENTS, "kafka": {"bootstrap": traffic["broker"].bootstrap},
        "lake": {"root": str(traffic["root"] / name)},
        "jobs": {"max_records_per_trigger": 4000, "compact_every_batches": 5},
        "spark": {"master": cluster.master_url}})
    add_ramps(settings.metadata.url, [RampRow(**row) for row in spec.ramp_rows()])
    publish_snapshot(settings, spec.start_ms + spec.duration_ms, None)
    return settings


def expected(traffic: Any, settings: Settings) -> pd.DataFrame:
    records, spec = traffic["records"], traffic["spec"]
    checkpoint = settings.lake.checkpoint("experiment_metrics")
    last = last_committed_batch(checkpoint)
    assert last is not None
    watermark = batch_watermark_ms(checkpoint, last)
    frame = reference_metrics(
        [r.value for r in records if r.topic == "events"],
        [r.value for r in records if r.topic == "experiment_activations"],
        spec.ramp_rows(), settings.experiments, watermark)
    return frame[KEY + VALUES].sort_values(KEY).reset_index(drop=True)


def run_filters(settings: Settings, folder: Path) -> None:
    running = [(job, start_job(settings, job, folder)) for job in JOBS[:2]]
    for job, process in running:
        finish(process, job, folder)


@pytest.fixture(scope="module")
def pipeline(standalone_cluster: ClusterSettings, traffic: Any) -> Settings:
    """The filters, then experiment_metrics, each an application on the cluster; after
    experiment_metrics' second batch, the first worker seen running one of its tasks is
    SIGKILLed with its executor and a new worker joins.
    The settings of the lake the run leaves."""
    settings = lake_settings(traffic, standalone_cluster, "lost_worker")
    folder = Path(settings.lake.root)
    run_filters(settings, folder)
    metrics_job = start_job(settings, "experiment_metrics", folder)
    wait_for_batch(settings, "experiment_metrics", metrics_job, folder, 1)
    lose_busy_worker(standalone_cluster, settings, "experiment_metrics", metrics_job)
    finish(metrics_job, "experiment_metrics", folder)
    assert wait_until(lambda: len(alive_workers(master_status(standalone_cluster))) == 2, 90)
    return settings


def test_the_pipeline_on_the_cluster_survives_a_lost_worker_exactly(
        standalone_cluster: ClusterSettings, traffic: Any, pipeline: Settings) -> None:
    """Tasks are retried and the state reloaded from the checkpoint: the metrics still equal
    the reference."""
    settings, folder = pipeline, Path(pipeline.lake.root)
    actual, reference = metrics(settings), expected(traffic, settings)
    assert len(reference) > 100 and not actual.duplicated(KEY).any()
    pd.testing.assert_frame_equal(actual, reference.astype(actual.dtypes.to_dict()))
    dead = read_arrow(settings.lake.table("dead_letters")).to_pandas()
    assert set(dead.reason) == {"malformed"}  # nothing late: the recovery kept event time
    apps = {app["name"] for app in master_status(standalone_cluster)["completedapps"]}
    assert {f"tideline-{job}" for job in JOBS} <= apps
    assert "Lost executor" in log_text(folder, "experiment_metrics")
    failed = set(failed_tasks(settings, "experiment_metrics"))
    assert "ExecutorLostFailure" in failed and failed <= RECOVERY_FAILURES, failed
    spark_tools_are_on(standalone_cluster, settings)


def spark_tools_are_on(cluster: ClusterSettings, settings: Settings) -> None:
    """Each job recorded its application and UI; the history server reads their event logs."""
    completed = {app["id"] for app in master_status(cluster)["completedapps"]}
    recorded = {job: read_application(settings, job) for job in JOBS}
    for job, app in recorded.items():
        assert app is not None and app["master"] == cluster.master_url, job
        assert app["app_id"] in completed and str(app["ui"]).startswith("http://127.0.0.1:")
    start_history(cluster, event_log_dir(settings.lake))
    wanted = {app["app_id"] for app in recorded.values() if app}
    assert wait_until(lambda: wanted <= history_applications(cluster), 120)


def history_applications(cluster: ClusterSettings) -> set[str]:
    """Application ids the history server lists (none while it is still starting)."""
    try:
        found = httpx.get(f"{cluster.history_ui}/api/v1/applications", timeout=10).json()
    except (httpx.HTTPError, ValueError):
        return set()
    return {app["id"] for app in found}


def test_the_daily_validation_passes_on_the_clusters_output(
        standalone_cluster: ClusterSettings, pipeline: Settings) -> None:
    """What daily_validation does once the day is closed, without Airflow: spark-submit the
    batch recomputation of the day to the cluster (its Python workers read the lake the
    streaming jobs wrote), then every case's Great Expectations checks pass on it."""
    settings = pipeline
    ready, why = day_closed(settings, DAY)
    assert ready, why
    submit_recompute(settings, DAY)
    batch = read_arrow(settings.lake.table("batch_experiment_metrics")).to_pandas()
    assert len(batch) > 100
    summary = validate_day(settings, DAY, "cluster")
    checks = {(case, check["check"]): check for case, found in summary["cases"].items()
              for check in found["checks"]}
    assert summary["success"], summary
    assert all(checks[(case, check)]["evaluated"] > 0 for case in CASES
               for check in (MONOTONE, DRIFT)), "every case checked windows of the day"
    assert {checks[(case, DRIFT)]["max_drift"] for case in CASES} == {0.0}
    apps = {app["name"] for app in master_status(standalone_cluster)["completedapps"]}
    assert f"tideline-recompute-{DAY.isoformat()}" in apps
