"""Each DAG runs green with `airflow dags test` on the small history lake (the streaming one
against a running broker), and leaves the effect it exists for."""

from __future__ import annotations

import datetime

import pytest
from helpers.airflow_setup import AirflowSetup, output_tail, run_airflow

from spark_jobs.experiments.admin.snapshot import (
    latest_snapshot_path,
    publish_snapshot,
    snapshot_as_of,
    snapshot_paths,
)
from spark_jobs.settings import load_settings

pytestmark = pytest.mark.airflow

DAGS_TEST_TIMEOUT_S = 300
JOBS = ("filter_events", "filter_activations", "experiment_metrics")


def dags_test(setup: AirflowSetup, dag_id: str, logical_date: str, **env: str) -> str:
    """`airflow dags test DAG DATE`; returns its output, fails the test on a red run."""
    result = run_airflow(
        {**setup.env, **env}, "dags", "test", dag_id, logical_date, timeout_s=DAGS_TEST_TIMEOUT_S
    )
    assert result.returncode == 0, f"{dag_id} failed:\n{output_tail(result)}"
    return result.stdout + result.stderr


def test_ramp_snapshot_publishes_as_of_the_run(cli_airflow):
    # After the history's own snapshot (as of 2026-01-04T01:00): an older as_of is a no-op.
    moment = datetime.datetime(2026, 1, 5, 0, 5, tzinfo=datetime.UTC)
    dags_test(cli_airflow, "ramp_snapshot", moment.isoformat())
    latest = latest_snapshot_path(cli_airflow.settings.lake.snapshots)
    assert latest is not None
    assert snapshot_as_of(latest) == int(moment.timestamp() * 1000)


def test_maintenance_prunes_snapshots_and_runs_every_step(cli_airflow):
    settings = cli_airflow.settings
    as_of = datetime.datetime(2026, 1, 6, tzinfo=datetime.UTC)
    publish_snapshot(settings, int(as_of.timestamp() * 1000), None)  # beside the history's
    before = snapshot_paths(settings.lake.snapshots)
    assert len(before) >= 2
    dags_test(cli_airflow, "maintenance", "2026-01-05", TIDELINE_MAINTENANCE__SNAPSHOTS_KEPT="1")
    assert snapshot_paths(settings.lake.snapshots) == [before[-1]]


def test_daily_validation_validates_the_day_of_its_data_interval(cli_airflow):
    from spark_jobs.control.validation_results import read_results

    day = cli_airflow.lake.days[0]
    # A manual run at midnight of day+1 covers the day before it (CronDataIntervalTimetable).
    logical_date = (day + datetime.timedelta(days=1)).isoformat()
    output = dags_test(cli_airflow, "daily_validation", logical_date)
    assert f"validation of {day.isoformat()}" in output
    results = read_results(cli_airflow.settings)
    assert set(results["logical_date"]) == {day}
    assert sorted(set(results["case"])) == sorted(
        ["single_ramp", "multi_ramp_in_first_period", "ramps_after_first_period"]
    )
    assert results["success"].all()


def test_streaming_jobs_deploys_every_job(cli_airflow, broker, tmp_path):
    from spark_jobs.control.monitor.supervisor import is_running, stop_all_jobs

    env = {
        "TIDELINE_KAFKA__BOOTSTRAP": broker,
        "TIDELINE_LAKE__ROOT": str(tmp_path / "lake"),
        "TIDELINE_MONITOR__STOP_TIMEOUT": "20s",
    }
    settings = load_settings(environ={**cli_airflow.env, **env})
    try:
        output = dags_test(cli_airflow, "streaming_jobs", "2026-01-05T00:01:00+00:00", **env)
        assert all(is_running(settings, job) for job in JOBS), output[-3000:]
        for job in JOBS:
            assert f"{job}: started (pid" in output
    finally:
        stop_all_jobs(settings)
    assert not any(is_running(settings, job) for job in JOBS)


def test_experiment_guardrails_alerts_a_drop_once(cli_airflow, tmp_path):
    from helpers.receivers import webhook_receiver

    from spark_jobs.results.synthetic_metrics import write_metrics

    env = {"TIDELINE_LAKE__ROOT": str(tmp_path / "lake")}
    write_metrics(load_settings(environ={**cli_airflow.env, **env}))
    with webhook_receiver() as (url, received):
        env["TIDELINE_ALERTS__WEBHOOK_URL"] = url
        output = dags_test(cli_airflow, "experiment_guardrails", "2026-01-01T12:05:00+00:00",
                           **env)
    assert "new guardrail drop(s)" in output
    assert received, output[-3000:]
    assert {body["alert"]["experiment_hash"] for body in received} == {"exp_guardrail"}
    assert all(body["alert"]["metric"].startswith("impression") for body in received)
    assert "/dags/experiment_guardrails/runs/" in received[0]["alert"]["run_url"]


def test_training_samples_shadow_checks_a_closed_day(cli_airflow, own_broker, run_now,
                                                     tmp_path):
    """Generated traffic of one day through the streaming job, then the DAG: it waits for the
    day's samples, spark-submits the comparison, and stores a passing result."""
    import json

    from spark_jobs.catalog import system_topics
    from spark_jobs.control.validation_results import read_results
    from spark_jobs.samples.traffic import SamplesTrafficSpec, generate_traffic
    from spark_jobs.streaming.kafka.producer import make_producer, produce_all
    from spark_jobs.streaming.kafka.topic_admin import ensure_topics

    day = datetime.date(2026, 1, 1)
    start = int(datetime.datetime(2026, 1, 1, 6, tzinfo=datetime.UTC).timestamp() * 1000)
    env = {"TIDELINE_LAKE__ROOT": str(tmp_path / "lake"), "TIDELINE_KAFKA__BOOTSTRAP": own_broker,
           "TIDELINE_SAMPLES__WINDOW": "20s", "TIDELINE_SAMPLES__LATENESS": "5s"}
    settings = load_settings(environ={**cli_airflow.env, **env})
    ensure_topics(settings.kafka, system_topics("samples"), settings.kafka.partitions)
    spec = SamplesTrafficSpec(users=50, posts=300, views_per_s=20, window_ms=20_000,
                              max_disorder_ms=4_000, seed=8)
    records = generate_traffic(spec, views=200, start_ms=start)
    tomorrow = start + 86_400_000  # closes every window of the day
    clock = {"view_id": "clock", "user_id": 0, "post_id": 0, "ts": tomorrow}
    records.append(("views", "0", json.dumps(clock).encode(), tomorrow))
    producer = make_producer(settings.kafka)
    for topic in ("views", "engagements"):
        mine = [r for r in records if r[0] == topic]
        produce_all(producer, topic, [r[1] for r in mine], [r[2] for r in mine],
                    [r[3] for r in mine])
    producer.flush(30)
    run_now(settings, "training_samples")

    output = dags_test(cli_airflow, "training_samples_shadow", day.isoformat(), **env)
    assert '"match_rate": 1.0' in output, output[-3000:]
    results = read_results(settings)
    assert sorted(zip(results["check"], results["success"], strict=True)) == [
        ("sample_match_rate", True), ("sample_schema", True)]
    assert set(results["case"]) == {"training_samples"}
