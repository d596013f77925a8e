"""Airflow Assets for Tideline's Delta tables, so Airflow's asset graph shows the lineage.

Tasks name the tables they read as inlets and the tables they write as outlets: the streaming
tables (raw_events, raw_activations, experiment_metrics, fraud_alerts, training_samples) flow
into the daily recomputation (batch_experiment_metrics), and both into the checks that write
validation_results. An asset is named after its table; its URI is the table's stable name in
Tideline's own scheme (`x-tideline://lake/<table>`) and the location (a local lake as
file://, an object store with its own scheme) is in its extra. Airflow identifies an asset by
name and URI and deactivates one whose name comes back with another URI: with the location as
URI, a moved `lake.root` (or two lakes parsed against one Airflow database, as the tests do)
left the new asset inactive and failed every task naming it. The streaming jobs that write
the streaming tables run outside Airflow, so those tables have no producing task, only
consumers.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from airflow.sdk import Asset

from spark_jobs.settings import Settings, load_settings

SCHEME = "x-tideline"  # Airflow leaves x- schemes as they are


def table_uri(location: str) -> str:
    """The URI of a table location: a local path becomes an absolute file:// URI."""
    if "://" in location:
        return location
    return Path(location).resolve().as_uri()


def table_asset(settings: Settings, table: str) -> Asset:
    """The Asset of one Delta table of the lake."""
    location = table_uri(settings.lake.table(table))
    return Asset(name=table, uri=f"{SCHEME}://lake/{table}",
                 extra={"format": "delta", "location": location})


def table_assets(settings: Settings, tables: Iterable[str]) -> list[Asset]:
    return [table_asset(settings, table) for table in tables]


def tables(*names: str) -> list[Asset]:
    """The Assets of these tables of the configured lake (inlets=/outlets= of a task)."""
    return table_assets(load_settings(), names)
