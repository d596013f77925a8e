"""Daily lake housekeeping: Delta compaction then vacuum of every table, pruning of old ramp
snapshots, and deletion of obsolete checkpoint files (`spark_jobs.control.maintenance`).

Every step is safe while the streaming jobs run, so the DAG needs no maintenance window.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import task

from spark_jobs.control.orchestration.dag_shapes import periodic_dag


# after the daily validation, not racing it
@periodic_dag("maintenance", __doc__, "0 3 * * *", timeout=timedelta(hours=2),
              retries=1, retry_delay=timedelta(minutes=5))
def maintenance() -> None:
    @task
    def compact_tables() -> dict[str, Any]:
        """Rewrite each table's small files into few large ones (per table: files +/-)."""
        from spark_jobs.control.maintenance import compact_tables
        from spark_jobs.settings import load_settings

        return compact_tables(load_settings())

    @task
    def vacuum_tables() -> dict[str, int]:
        """Delete files no table version within the retention references (after compaction)."""
        from spark_jobs.control.maintenance import vacuum_tables
        from spark_jobs.settings import load_settings

        return vacuum_tables(load_settings())

    @task
    def prune_snapshots() -> int:
        """Keep the newest `maintenance.snapshots_kept` ramp snapshots."""
        from spark_jobs.control.maintenance import prune_old_snapshots
        from spark_jobs.settings import load_settings

        return prune_old_snapshots(load_settings())

    @task
    def clean_checkpoints() -> dict[str, int]:
        """Delete checkpoint log entries Spark no longer needs to restart a job."""
        from spark_jobs.control.maintenance import clean_checkpoints
        from spark_jobs.settings import load_settings

        return clean_checkpoints(load_settings())

    compact_tables() >> vacuum_tables()
    prune_snapshots()
    clean_checkpoints()


maintenance()
