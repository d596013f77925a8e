"""Shadow validation of training samples: the seed's separate pipeline that proved the
streaming joiner right before and after its migration.

The run for logical date D waits until the `training_samples` job has emitted every sample
of day D (its committed watermark past D+1 plus `samples.window`), then spark-submits
`tideline samples shadow --date D`: an independent Spark SQL recomputation of the day's
samples from the `views` and `engagements` topics, compared with the `training_samples`
table. The match rate and schema agreement are stored in `validation_results` (case
`training_samples`); below `samples.min_match_rate` (99.9 %) or on a schema difference the
run alerts through the configured channels and goes red. Catchup is on, so
`airflow backfill create --dag-id training_samples_shadow --from-date ... --to-date ...`
checks any range from `validation.start_date` on.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import CronDataIntervalTimetable, Param, PokeReturnValue, dag, task

from spark_jobs.control.orchestration.callbacks import alert_on_failure
from spark_jobs.control.orchestration.runs import DAY_PARAM, run_day, run_url, validation_start
from spark_jobs.settings import load_settings


@dag(
    dag_id="training_samples_shadow",
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
def training_samples_shadow() -> None:
    @task.sensor(poke_interval=60, timeout=6 * 3600, mode="reschedule",
                 on_failure_callback=alert_on_failure)
    def wait_for_samples(**context: Any) -> PokeReturnValue:
        """Wait until the streaming job has emitted every sample of the day."""
        from spark_jobs.samples.shadow.run import day_closed

        ready, why = day_closed(load_settings(), run_day(context))
        print(why)
        return PokeReturnValue(is_done=ready)

    @task(max_active_tis_per_dag=1, retries=0, on_failure_callback=alert_on_failure)
    def compare(**context: Any) -> str:
        """spark-submit the comparison; a mismatch alerts with its numbers (exit 3), any other
        failure through the failure callback."""
        from spark_jobs.control.submit import submit_cli

        settings = load_settings()
        day = run_day(context).isoformat()
        submit_cli(settings, ["samples", "shadow", "--date", day, "--run-id",
                              context["run_id"], "--run-url", run_url(settings, context)],
                   f"tideline-samples-shadow-{day}", f"shadow validation of {day}")
        return day

    wait_for_samples() >> compare()


training_samples_shadow()
