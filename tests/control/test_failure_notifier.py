"""The DAGs' failure callback, Airflow's notifier form: called by Airflow with a failed task's
context, it sends Tideline's alert through the configured channels and the `alerts` table."""

from __future__ import annotations

import datetime
from types import SimpleNamespace

import pytest
from helpers.receivers import webhook_receiver

from spark_jobs.streaming.lake.delta import read_arrow, table_exists

pytestmark = pytest.mark.integration

RUN_ID = "scheduled__2026-03-01T00:00:00+00:00"


class AlreadyAlerted(RuntimeError):
    already_alerted = True


def failed_task_context(exception: BaseException) -> dict:
    """The keys Airflow 3's task runner gives a failure callback (the ones a notifier reads
    with the objects' attributes): the task instance, the DAG and its run, the exception."""
    from airflow.sdk import DAG

    day = datetime.datetime(2026, 3, 1, tzinfo=datetime.UTC)
    dag = DAG("daily_validation", schedule=None)
    ti = SimpleNamespace(dag_id="daily_validation", task_id="recompute", run_id=RUN_ID,
                         try_number=2, map_index=-1)
    dag_run = SimpleNamespace(dag_id="daily_validation", run_id=RUN_ID, run_after=day,
                              logical_date=day)
    return {"dag": dag, "ti": ti, "task_instance": ti, "dag_run": dag_run, "run_id": RUN_ID,
            "logical_date": day, "data_interval_start": day,
            "data_interval_end": day + datetime.timedelta(days=1), "params": {},
            "exception": exception}


@pytest.fixture
def task_settings(make_settings, monkeypatch):
    """Settings a task process sees: the notifier loads them from its environment."""

    def build(**alerts):
        settings = make_settings(alerts=alerts, airflow={"base_url": "http://af.example"})
        monkeypatch.delenv("TIDELINE_CONFIG", raising=False)
        monkeypatch.setenv("TIDELINE_LAKE__ROOT", settings.lake.root)
        monkeypatch.setenv("TIDELINE_AIRFLOW__BASE_URL", "http://af.example")
        for key, value in alerts.items():
            monkeypatch.setenv(f"TIDELINE_ALERTS__{key.upper()}", value)
        return settings

    return build


def test_the_notifier_sends_the_failure_with_its_run_link(task_settings):
    from spark_jobs.control.orchestration.notifier import AlertNotifier

    with webhook_receiver() as (url, received):
        settings = task_settings(webhook_url=url)
        AlertNotifier()(failed_task_context(RuntimeError("spark-submit exit 1\nlog tail")))
    link = f"http://af.example/dags/daily_validation/runs/{RUN_ID.replace(':', '%3A')}"
    link = link.replace("+", "%2B")
    assert len(received) == 1
    alert = received[0]["alert"]
    assert (alert["source"], alert["kind"]) == ("daily_validation", "task_failed")
    assert alert["summary"] == "task recompute failed: spark-submit exit 1"
    assert alert["run_url"] == link and alert["details"]["try_number"] == 2
    row = read_arrow(settings.lake.table("alerts")).to_pylist()
    assert [(r["kind"], r["channels"]) for r in row] == [("task_failed", "webhook,log,table")]


def test_a_failure_its_check_already_alerted_on_sends_nothing_more(task_settings):
    from spark_jobs.control.orchestration.notifier import AlertNotifier

    with webhook_receiver() as (url, received):
        settings = task_settings(webhook_url=url)
        AlertNotifier()(failed_task_context(AlreadyAlerted("drift above the limit")))
    assert received == []
    assert not table_exists(settings.lake.table("alerts"))
