"""Alert on a significant drop of a guardrail metric of a running experiment, every 5 minutes.

The seed's first use case: an experiment that lowers impressions must be shut down within
minutes. Each run judges the running experiments from `experiment_metrics` as the dashboard
does and sends each new drop once through the alert channels (`spark_jobs.results.guardrails`).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import task

from spark_jobs.contracts.tables import TABLE_EXPERIMENT_METRICS
from spark_jobs.control.orchestration.assets import tables
from spark_jobs.control.orchestration.dag_shapes import periodic_dag
from spark_jobs.control.orchestration.runs import run_url


@periodic_dag("experiment_guardrails", __doc__, "*/5 * * * *", timeout=timedelta(minutes=5),
              retries=1, retry_delay=timedelta(seconds=20))
def experiment_guardrails() -> None:
    @task(inlets=tables(TABLE_EXPERIMENT_METRICS))
    def check(**context: Any) -> list[dict[str, Any]]:
        """Judge the running experiments; the new drops alerted on are the XCom result."""
        from spark_jobs.results.guardrails import check_guardrails
        from spark_jobs.settings import load_settings

        settings = load_settings()
        alerts = check_guardrails(settings, run_url(settings, context))
        for alert in alerts:
            print(alert.summary)
        print(f"{len(alerts)} new guardrail drop(s)")
        return [{"experiment": a.experiment_hash, "group": a.experiment_group,
                 "metric": a.metric} for a in alerts]

    check()


experiment_guardrails()
