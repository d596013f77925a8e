"""Publish the experiment ramp snapshot every `experiments.snapshot_interval` (5 minutes).

The streaming jobs re-read the newest snapshot, so this DAG is how a ramp entered in the
metadata DB reaches them. Each run publishes as of its data interval's end; a retry or a
re-run of the same interval adds no second file
(`spark_jobs.experiments.admin.snapshot.publish_for_run`). A metadata DB that is missing or
has no `ramps` table, or an empty snapshot replacing one whose periods are still current,
fails the task, and its failure callback alerts (CONTRACTS.md section 9).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import task

from spark_jobs.control.orchestration.dag_shapes import periodic_dag
from spark_jobs.control.orchestration.runs import as_of_ms, schedule_every
from spark_jobs.settings import load_settings

INTERVAL_MS = load_settings().experiments.snapshot_interval_ms


@periodic_dag("ramp_snapshot", __doc__, schedule_every(INTERVAL_MS),
              timeout=timedelta(minutes=5), retries=2, retry_delay=timedelta(seconds=20))
def ramp_snapshot() -> None:
    @task
    def publish(**context: Any) -> dict[str, Any]:
        """Publish the ramp snapshot as of this run; the file name is the XCom result."""
        from spark_jobs.experiments.admin.snapshot import publish_for_run

        as_of = as_of_ms(context)
        path, published = publish_for_run(load_settings(), as_of)
        print(f"{'published' if published else 'already current:'} {path} (as of {as_of} ms)")
        return {"snapshot": str(path), "published": published, "as_of_ms": as_of}

    publish()


ramp_snapshot()
