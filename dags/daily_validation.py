"""Daily validation: recompute a day's experiment metrics in batch, then check them with
Great Expectations, one task per seed case, each building the Data Docs pages the run
links to.

The run first waits until the streaming job's watermark has passed the end of its day
(`wait_for_day_closed`, a rescheduling sensor that alerts when it times out after 6 h).
The run for logical date D covers day D (its data interval [D, D+1) UTC). A manual run from
the UI covers the last complete day before the click, or the day given in the `day` param.
Catchup is on, so `airflow backfill create --dag-id daily_validation --from-date ...
--to-date ...` validates any range from `validation.start_date` on (a backfill runs up to
10 days at once, each a Spark application, unless given `--max-active-runs`). The start date
has no default here, as a guessed one would start a run for every day since: set
`validation.start_date`, or let `tideline platform` set it. Each case stores its
outcome in the `validation_results` table (and alerts on failure) before its task fails;
the `report` task then lists every check with its Data Docs page, whatever the cases'
outcome, and the run is green only when every check passed.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import TriggerRule, task

from spark_jobs.contracts.tables import (
    TABLE_BATCH_METRICS,
    TABLE_DEAD_LETTERS,
    TABLE_EXPERIMENT_METRICS,
    TABLE_RAW_ACTIVATIONS,
    TABLE_RAW_EVENTS,
    TABLE_VALIDATION_RESULTS,
)
from spark_jobs.control.orchestration.assets import tables
from spark_jobs.control.orchestration.dag_shapes import daily_dag, spark_task, wait_for_day_closed
from spark_jobs.control.orchestration.runs import run_day, run_url
from spark_jobs.experiments.validation.cases import CASES
from spark_jobs.settings import load_settings

RAW = (TABLE_RAW_EVENTS, TABLE_RAW_ACTIVATIONS)  # the filters' streaming tables


@daily_dag("daily_validation", __doc__, "validate",
           default_args={"retries": 1, "retry_delay": timedelta(minutes=2)})
def daily_validation() -> None:
    day_closed = wait_for_day_closed(
        "wait_for_day_closed", "spark_jobs.experiments.validation.readiness",
        "Wait until the streaming job has closed the day's last window (its watermark).")

    # in the Spark pool: one spark-submit at a time beside the streaming jobs
    @spark_task(inlets=tables(*RAW, TABLE_DEAD_LETTERS), outlets=tables(TABLE_BATCH_METRICS))
    def recompute(**context: Any) -> str:
        """spark-submit the batch recomputation of the run's day; returns the day."""
        from spark_jobs.control.submit import submit_recompute

        day = run_day(context)
        submit_recompute(load_settings(), day)
        return day.isoformat()

    @task(retries=0, inlets=tables(TABLE_EXPERIMENT_METRICS, TABLE_BATCH_METRICS, *RAW),
          outlets=tables(TABLE_VALIDATION_RESULTS))
    def validate(case: str, **context: Any) -> dict[str, Any]:
        """Run the case's suites; the summary is the XCom result, a failure fails the task."""
        from spark_jobs.experiments.validation.run import validate_case

        settings = load_settings()
        return validate_case(
            settings, run_day(context), case, context["run_id"], run_url(settings, context)
        )

    @task(trigger_rule=TriggerRule.ALL_DONE, retries=0, inlets=tables(TABLE_VALIDATION_RESULTS))
    def report(**context: Any) -> dict[str, Any]:
        """Log every case's checks with links to the Data Docs; fail unless all passed.

        It runs whatever the cases' outcome (and is the run's last task, so it must fail
        too, or a run with a failed case would end green).
        """
        from spark_jobs.control.orchestration.validation_report import validation_report

        settings = load_settings()
        text, summary = validation_report(settings, run_day(context), context["run_id"], CASES)
        print(text)
        if not summary["success"]:
            raise RuntimeError(f"validation of {summary['day']} failed: see the table above")
        return summary

    checks = [validate.override(task_id=f"validate_{case}")(case) for case in CASES]
    day_closed >> recompute() >> checks >> report()


daily_validation()
