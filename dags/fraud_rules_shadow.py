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

from spark_jobs.contracts.tables import TABLE_FRAUD_ALERTS
from spark_jobs.control.orchestration.dag_shapes import daily_check_dag

fraud_rules_shadow = daily_check_dag(
    "fraud_rules_shadow", __doc__,
    wait_task_id="wait_for_alerts",
    wait_doc="Wait until the streaming job has evaluated every transaction of the day.",
    readiness="spark_jobs.fraud.shadow.run",
    command=("rules", "check"),
    title="fraud rules check",
    checks=TABLE_FRAUD_ALERTS,
)
