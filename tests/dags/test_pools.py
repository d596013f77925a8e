"""What the project's setup of Airflow creates in its database (the Spark pool), and what it
warms before it returns (the Execution API)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.airflow


def test_airflow_started_by_the_project_has_the_spark_pool(running_airflow):
    pool = running_airflow.client.pool("tideline_spark")
    assert pool["slots"] == 1  # airflow.spark_slots
    assert "airflow.spark_slots" in pool["description"]
    # a second start (the platform restarted on the same home) updates it in place
    running_airflow.client.set_pool("tideline_spark", 2, "changed")
    running_airflow.standalone.prepare()
    assert running_airflow.client.pool("tideline_spark")["slots"] == 1


def test_the_execution_api_is_built_before_start_returns(running_airflow):
    """start() warms the Execution API (its routes are built on its first request, blocking
    every other request meanwhile) through a path that must exist: a 404 would warm nothing."""
    import httpx

    from spark_jobs.control.orchestration.standalone import EXECUTION_HEALTH_PATH

    answer = httpx.get(running_airflow.standalone.local_url + EXECUTION_HEALTH_PATH, timeout=30)
    assert answer.status_code == 200, answer.text
