"""Deploy and watch the streaming jobs, every minute.

The jobs are those of `monitor.jobs` (default: filter_events, filter_activations,
experiment_metrics; fraud_rules and training_samples can be added). One task per job
(`watch_<job>`) makes sure the job runs: it starts it with spark-submit when it is not running,
restarts it from its checkpoint when it died, judges its health from the progress it reports
and its Kafka lag, and raises an alert when it is down, lagging, stale, or restarting in a
loop (`spark_jobs.control.monitor.watch_job`). Its status is the task's XCom result and one line in
its log. The `summary` task logs a table of every job and fails when a job is down, so a red
run in the grid means a job needs a person.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import TriggerRule, dag, task

from spark_jobs.control.orchestration.runs import EPOCH, run_url
from spark_jobs.settings import load_settings

JOBS = load_settings().monitor.jobs

WATCH_TASK_PREFIX = "watch_"


@dag(
    dag_id="streaming_jobs",
    schedule="* * * * *",
    start_date=EPOCH,
    catchup=False,
    max_active_runs=1,
    dagrun_timeout=timedelta(minutes=10),
    tags=["tideline"],
    doc_md=__doc__,
)
def streaming_jobs() -> None:
    @task
    def watch(job: str, **context: Any) -> dict[str, Any]:
        """One supervision pass over the job; its status dict is the XCom result."""
        from spark_jobs.control.monitor.summary import describe
        from spark_jobs.control.monitor.watch import watch_job

        settings = load_settings()
        status = watch_job(settings, job, run_url(settings, context))
        print(describe(status))
        return status

    @task(trigger_rule=TriggerRule.ALL_DONE)
    def summary(**context: Any) -> None:
        """Log every job's status as a table; fail when a job is down or was not watched."""
        from spark_jobs.control.monitor.summary import render_summary

        ti = context["ti"]
        pulled = [ti.xcom_pull(task_ids=f"{WATCH_TASK_PREFIX}{job}") for job in JOBS]
        statuses = [s for s in pulled if s]
        print(render_summary(statuses))
        unwatched = [job for job, s in zip(JOBS, pulled, strict=True) if not s]
        down = [s["job"] for s in statuses if s["state"] == "down"]
        if unwatched or down:
            raise RuntimeError(
                f"streaming jobs down: {', '.join(down) or 'none'}; "
                f"not watched (task failed): {', '.join(unwatched) or 'none'}"
            )

    watches = [watch.override(task_id=f"{WATCH_TASK_PREFIX}{job}")(job) for job in JOBS]
    watches >> summary()


streaming_jobs()
