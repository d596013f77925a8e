"""The offline check of fraud detection: a day's `fraud_alerts` against a replay of the topics.

The run for logical date D waits until the `fraud_rules` job's committed watermark has passed
the end of day D (every transaction of the day is then either evaluated or late), then
spark-submits `tideline rules check --date D`: the `rules` and `transactions` topics replayed
through the pure fraud engine in the contract's arrival order, compared with the day's rows
of `fraud_alerts` (by the triggering transaction's eventTime). The match rate is stored in
`validation_results` (case `fraud_rules`); anything below an exact match alerts through the
configured channels and the run goes red. Catchup is on, so
`airflow backfill create --dag-id fraud_rules_shadow --from-date ... --to-date ...` checks
any range from `validation.start_date` on.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import CronDataIntervalTimetable, Param, PokeReturnValue, dag, task

from spark_jobs.control.orchestration.callbacks import alert_on_failure
from spark_jobs.control.orchestration.runs import DAY_PARAM, run_day, run_url, validation_start
from spark_jobs.settings import load_settings


@dag(
    dag_id="fraud_rules_shadow",
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=validation_start(load_settings()),
    catchup=True,
    max_active_runs=1,
    dagrun_timeout=timedelta(hours=3),
    params={
        DAY_PARAM: Param(
            None, type=["null", "string"], format="date",
            description="Day to check (YYYY-MM-DD); empty: the run's own day",
        )
    },
    tags=["tideline"],
    doc_md=__doc__,
)
def fraud_rules_shadow() -> None:
    @task.sensor(poke_interval=60, timeout=6 * 3600, mode="reschedule",
                 on_failure_callback=alert_on_failure)
    def wait_for_alerts(**context: Any) -> PokeReturnValue:
        """Wait until the streaming job has evaluated every transaction of the day."""
        from spark_jobs.fraud.shadow.run import day_closed

        ready, why = day_closed(load_settings(), run_day(context))
        print(why)
        return PokeReturnValue(is_done=ready)

    @task(max_active_tis_per_dag=1, retries=0, on_failure_callback=alert_on_failure)
    def compare(**context: Any) -> str:
        """spark-submit the check; a mismatch alerts with its numbers (exit 3), any other
        failure through the failure callback."""
        from spark_jobs.control.submit import submit_cli

        settings = load_settings()
        day = run_day(context).isoformat()
        submit_cli(settings, ["rules", "check", "--date", day, "--run-id",
                              context["run_id"], "--run-url", run_url(settings, context)],
                   f"tideline-rules-check-{day}", f"fraud rules check of {day}")
        return day

    wait_for_alerts() >> compare()


fraud_rules_shadow()
