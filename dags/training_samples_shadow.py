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

from spark_jobs.contracts.tables import TABLE_TRAINING_SAMPLES
from spark_jobs.control.orchestration.dag_shapes import daily_check_dag

training_samples_shadow = daily_check_dag(
    "training_samples_shadow", __doc__,
    wait_task_id="wait_for_samples",
    wait_doc="Wait until the streaming job has emitted every sample of the day.",
    readiness="spark_jobs.samples.shadow.run",
    command=("samples", "shadow"),
    title="shadow validation",
    checks=TABLE_TRAINING_SAMPLES,
)
