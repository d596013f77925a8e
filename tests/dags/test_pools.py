"""What the project's setup of Airflow creates in its database: the Spark pool."""

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
