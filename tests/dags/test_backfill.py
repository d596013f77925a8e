"""A backfill over the last two days of history, created with `airflow backfill create` against
a running Airflow, validates each day once: two green runs, two logical dates of results.
(Two days prove a range is one run per day as well as three did, and each run is a
spark-submit in turn: max_active_runs=1. The first day is validated by `airflow dags test` in
test_dags_run.py.)"""

from __future__ import annotations

import time

import pytest
from helpers.airflow_setup import output_tail, run_airflow

pytestmark = pytest.mark.airflow

BACKFILL_TIMEOUT_S = 420
CASES = {"single_ramp", "multi_ramp_in_first_period", "ramps_after_first_period"}


def wait_for_backfill_runs(client, count: int, timeout_s: float) -> list[dict]:
    """The DAG's backfill runs once `count` of them exist and all have finished."""
    deadline = time.monotonic() + timeout_s
    runs: list[dict] = []
    while time.monotonic() < deadline:
        runs = [r for r in client.runs("daily_validation") if r["run_type"] == "backfill"]
        if len(runs) >= count and all(r["state"] in ("success", "failed") for r in runs):
            return runs
        time.sleep(3)
    states = {r["run_id"]: client.task_states("daily_validation", r["run_id"]) for r in runs}
    raise AssertionError(f"backfill not finished after {timeout_s} s: {states}")


def test_backfill_validates_each_day_once(running_airflow):
    from spark_jobs.control.validation_results import read_results

    setup = running_airflow.setup
    days = setup.lake.days[1:]
    assert len(days) == 2
    result = run_airflow(
        setup.env, "backfill", "create", "--dag-id", "daily_validation",
        "--from-date", days[0].isoformat(), "--to-date", days[-1].isoformat(),
        timeout_s=120,
    )
    assert result.returncode == 0, output_tail(result)

    runs = wait_for_backfill_runs(running_airflow.client, len(days), BACKFILL_TIMEOUT_S)
    assert [r["state"] for r in runs] == ["success"] * len(days), runs
    assert sorted(r["logical_date"][:10] for r in runs) == [d.isoformat() for d in days]

    results = read_results(setup.settings)
    backfilled = results[results["run_id"].isin([r["dag_run_id"] for r in runs])]
    assert sorted(set(backfilled["logical_date"])) == days
    for day in days:
        of_day = backfilled[backfilled["logical_date"] == day]
        assert set(of_day["case"]) == CASES
        assert of_day["success"].all(), of_day[["case", "check", "success", "details"]]
