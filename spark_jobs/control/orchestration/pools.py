"""The Airflow pool of Tideline's Spark batch work.

Every task that spark-submits a batch application (the daily recomputation, the offline
checks) runs in the pool `tideline_spark`, of `airflow.spark_slots` slots (1 by default):
two daily DAGs, or a backfill of several days, then never start two Spark applications at
once beside the streaming jobs on a small machine; the others wait queued in the pool, visible
under Admin -> Pools. The platform creates the pool when Airflow starts (`ensure_pools`).
"""

from __future__ import annotations

from typing import Any

from spark_jobs.settings import Settings

SPARK_POOL = "tideline_spark"
SPARK_POOL_DESCRIPTION = (
    "Tideline's Spark batch applications (recomputation, offline checks): "
    "slots = airflow.spark_slots"
)


def pools(settings: Settings) -> dict[str, tuple[int, str]]:
    """Name -> (slots, description) of every pool Tideline's DAGs use."""
    return {SPARK_POOL: (settings.airflow.spark_slots, SPARK_POOL_DESCRIPTION)}


def ensure_pools(client: Any, settings: Settings) -> None:
    """Create or update the pools through `client` (an `AirflowClient`): the settings win
    over an edit in the UI at the next start, as for every other setting."""
    for name, (slots, description) in pools(settings).items():
        client.set_pool(name, slots, description)
