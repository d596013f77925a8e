"""Each DAG runs green with `airflow dags test` on the small history lake (the streaming one
against a running broker), and leaves the effect it exists for."""

from __future__ import annotations

import datetime

import pytest
from airflow_helpers import AirflowSetup, output_tail, run_airflow

from spark_jobs.config import load_settings
from spark_jobs.snapshot import (
    latest_snapshot_path,
    publish_snapshot,
    snapshot_as_of,
    snapshot_paths,
)

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
    from spark_jobs.validation.results import read_results

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
    from spark_jobs.monitor.supervisor import is_running, stop_all_jobs

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

    from spark_jobs.synthetic_metrics import write_metrics

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
