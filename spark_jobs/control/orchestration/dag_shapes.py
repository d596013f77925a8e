"""The shapes Tideline's DAGs share, so each DAG file only says what is its own.

- `periodic_dag`: a schedule that never catches up, one run at a time, every failed task
  alerting (ramp snapshot, guardrails, maintenance).
- `daily_dag`: one run per UTC day from `validation.start_date`, caught up, with the `day`
  param a person sets to re-run a chosen day (daily validation and the offline checks).
- `wait_for_day_closed`: the daily DAGs' first task, a rescheduling sensor that waits until
  the system's streaming job has closed the run's day.
- `daily_check_dag`: a system's offline check (fraud rules, training samples): wait for the
  day, then spark-submit the system's `tideline ... --date D` check.
- `spark_task`: the @task of every task that spark-submits a batch application: in the
  pool `tideline_spark` (`pools.py`), so Airflow runs one at a time beside the streaming jobs.

Airflow parses a file of the DAG folder only when its text says both "airflow" and "dag"
(safe mode): a DAG file that only calls these helpers keeps a docstring that does.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, CronDataIntervalTimetable, Param, PokeReturnValue, dag, task

from spark_jobs.contracts.tables import TABLE_VALIDATION_RESULTS
from spark_jobs.control.orchestration.assets import tables
from spark_jobs.control.orchestration.notifier import alert_on_failure
from spark_jobs.control.orchestration.pools import SPARK_POOL
from spark_jobs.control.orchestration.runs import (
    DAY_PARAM,
    EPOCH,
    run_day,
    run_url,
    validation_start,
)
from spark_jobs.settings import load_settings


def spark_task(**options: Any) -> Any:
    """@task of a task that spark-submits a batch application: it waits for a slot of the
    Spark pool, runs once at a time per DAG (a backfill starts up to 10 days at once), and
    alerts when it fails; `options` are further @task arguments."""
    return task(**{"pool": SPARK_POOL, "max_active_tis_per_dag": 1,
                   "on_failure_callback": alert_on_failure, **options})


def periodic_dag(dag_id: str, doc: str, schedule: str | timedelta, *, timeout: timedelta,
                 retries: int, retry_delay: timedelta) -> Callable[..., Any]:
    """The @dag decorator of a DAG run on `schedule` from now on (no catch-up)."""
    return dag(
        dag_id=dag_id,
        schedule=schedule,
        start_date=EPOCH,
        catchup=False,
        max_active_runs=1,
        dagrun_timeout=timeout,
        default_args={"retries": retries, "retry_delay": retry_delay,
                      "on_failure_callback": alert_on_failure},
        tags=["tideline"],
        doc_md=doc,
    )


def daily_dag(dag_id: str, doc: str, day_verb: str, **options: Any) -> Callable[..., Any]:
    """The @dag decorator of a daily DAG; `day_verb` says what a run does with its day in the
    `day` param's description, `options` are further @dag arguments."""
    return dag(
        dag_id=dag_id,
        schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
        start_date=validation_start(load_settings()),
        catchup=True,
        max_active_runs=1,
        dagrun_timeout=timedelta(hours=3),
        params={
            DAY_PARAM: Param(
                None, type=["null", "string"], format="date",
                description=f"Day to {day_verb} (YYYY-MM-DD); empty: the run's own day",
            )
        },
        tags=["tideline"],
        doc_md=doc,
        **options,
    )


def wait_for_day_closed(task_id: str, readiness: str, doc: str) -> Any:
    """A sensor done once `<readiness module>.day_closed(settings, day)` says the run's day
    is closed; it alerts when it gives up. The module is imported only when the sensor
    pokes, so parsing the DAG stays light. Returns the task, for `>>`."""

    @task.sensor(task_id=task_id, doc_md=doc, poke_interval=60, timeout=6 * 3600,
                 mode="reschedule", on_failure_callback=alert_on_failure)
    def wait(**context: Any) -> PokeReturnValue:
        day_closed = importlib.import_module(readiness).day_closed
        ready, why = day_closed(load_settings(), run_day(context))
        print(why)
        return PokeReturnValue(is_done=ready)

    return wait()


def daily_check_dag(dag_id: str, doc: str, *, wait_task_id: str, wait_doc: str,
                    readiness: str, command: Sequence[str], title: str, checks: str) -> DAG:
    """A system's daily offline check: `wait_task_id` (see wait_for_day_closed), then
    `compare`, a spark-submit of `tideline COMMAND --date D` named after the command, which
    stores its result in validation_results and alerts on a mismatch itself. `title` names
    the check in the submission's messages, `checks` the streaming table it checks (the
    task's inlet asset)."""

    @daily_dag(dag_id, doc, "check")
    def daily_check() -> None:
        @spark_task(task_id="compare", retries=0, inlets=tables(checks),
                    outlets=tables(TABLE_VALIDATION_RESULTS))
        def compare(**context: Any) -> str:
            """spark-submit the check; a mismatch alerts with its numbers (exit 3), any other
            failure through the failure callback."""
            from spark_jobs.control.submit import submit_cli

            settings = load_settings()
            day = run_day(context).isoformat()
            submit_cli(settings, [*command, "--date", day, "--run-id", context["run_id"],
                                  "--run-url", run_url(settings, context)],
                       f"tideline-{'-'.join(command)}-{day}", f"{title} of {day}")
            return day

        wait_for_day_closed(wait_task_id, readiness, wait_doc) >> compare()

    return daily_check()
