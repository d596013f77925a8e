"""The metrics pipeline on a standalone cluster (2 workers of 1 core): the three jobs run as
users run them (`tideline job run ... --available-now` against the master) and the metrics
equal the pandas recomputation, with a worker and its executor SIGKILLed in the middle of
experiment_metrics and a new worker taking its place (one run proves both: it costs three
applications' start-up, the suite's budget allows one)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from reference.metrics_reference import experiment_metrics as reference_metrics

from spark_jobs.cluster.daemons import kill_daemon, read_record, wait_until
from spark_jobs.cluster.settings import ClusterSettings
from spark_jobs.cluster.standalone import alive_workers, master_status, start_worker, worker_name
from spark_jobs.control.submit import freeze_settings, frozen_environment
from spark_jobs.experiments.admin.metadata import add_ramps
from spark_jobs.experiments.admin.snapshot import publish_snapshot
from spark_jobs.experiments.core.periods import RampRow
from spark_jobs.experiments.traffic import TrafficSpec, generate, produce
from spark_jobs.local.broker import EmbeddedBroker
from spark_jobs.settings import Settings, load_settings
from spark_jobs.streaming.checkpoint import batch_watermark_ms, last_committed_batch
from spark_jobs.streaming.lake.delta import read_arrow
from spark_jobs.streaming.progress import read_progress

pytestmark = [pytest.mark.integration, pytest.mark.kafka, pytest.mark.e2e]

HOUR = 3_600_000
KEY = ["experiment_hash", "experiment_group", "period_start", "event_type", "window_end"]
VALUES = ["is_control", "triggered_users", "volume", "propensity", "volume_sum_squares"]
EXPERIMENTS = {"period": "40m", "window": "5m", "lateness": "1m", "dedup_ttl": "1m",
               "cap_per_user_hour": 300}
JOBS = ("filter_events", "filter_activations", "experiment_metrics")


def start_job(settings: Settings, job: str, folder: Path) -> subprocess.Popen[bytes]:
    config = freeze_settings(settings, folder / f"{job}.yaml")
    log = (folder / f"{job}.log").open("ab")
    return subprocess.Popen(
        [sys.executable, "-m", "spark_jobs.cli", "job", "run", job, "--available-now"],
        env=frozen_environment(config, os.environ), start_new_session=True,
        stdout=log, stderr=subprocess.STDOUT)


def finish(process: subprocess.Popen[bytes], job: str, folder: Path) -> None:
    code = process.wait(600)
    assert code == 0, (folder / f"{job}.log").read_text()[-4000:]


def metrics(settings: Settings) -> pd.DataFrame:
    table = read_arrow(settings.lake.table("experiment_metrics")).to_pandas()
    return table[KEY + VALUES].sort_values(KEY).reset_index(drop=True)


@pytest.fixture
def traffic(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The generated input in a broker of its own (each test's filters write its topics)."""
    with EmbeddedBroker(port=0) as broker:
        root = tmp_path_factory.mktemp("cluster_pipeline")
        base = load_settings(environ={}, overrides={
            "experiments": EXPERIMENTS, "kafka": {"bootstrap": broker.bootstrap},
            "lake": {"root": str(root / "input")}})
        spec = TrafficSpec.from_settings(base.experiments, seed=17, duration_ms=2 * HOUR,
                                         n_users=150)
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


def test_the_pipeline_on_the_cluster_survives_a_lost_worker_exactly(
        standalone_cluster: ClusterSettings, traffic: Any) -> None:
    """The filters, then experiment_metrics, each an application on the cluster; worker 2 and
    its executor are SIGKILLed after experiment_metrics' second batch and a new worker joins;
    tasks are retried and the state reloaded from the checkpoint: the metrics still equal the
    reference."""
    settings = lake_settings(traffic, standalone_cluster, "lost_worker")
    folder = Path(settings.lake.root)
    run_filters(settings, folder)
    metrics_job = start_job(settings, "experiment_metrics", folder)
    deadline = time.monotonic() + 300
    while (read_progress(settings, "experiment_metrics") or {}).get("batchId", -1) < 1:
        assert metrics_job.poll() is None, (folder / "experiment_metrics.log").read_text()[-3000:]
        assert time.monotonic() < deadline, "experiment_metrics made no progress"
        time.sleep(0.2)
    record = read_record(Path(standalone_cluster.home), worker_name(2))
    assert record is not None
    kill_daemon(record)
    start_worker(standalone_cluster, 2)
    finish(metrics_job, "experiment_metrics", folder)
    assert wait_until(lambda: len(alive_workers(master_status(standalone_cluster))) == 2, 90)
    actual, reference = metrics(settings), expected(traffic, settings)
    assert len(reference) > 100 and not actual.duplicated(KEY).any()
    pd.testing.assert_frame_equal(actual, reference.astype(actual.dtypes.to_dict()))
    dead = read_arrow(settings.lake.table("dead_letters")).to_pandas()
    assert set(dead.reason) == {"malformed"}  # nothing late: the recovery kept event time
    apps = {app["name"] for app in master_status(standalone_cluster)["completedapps"]}
    assert {f"tideline-{job}" for job in JOBS} <= apps
    assert "Lost executor" in (folder / "experiment_metrics.log").read_text()
