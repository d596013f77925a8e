"""A lake of three days of generated history, shared by the batch, validation and DAG tests.

Three days of compressed-but-complete semantics (1-day periods, 1-hour windows) so that a
daily DAG has three whole logical dates to validate: single ramps, several ramp-ups inside
the first period, and re-ramps after the first period (a second period that must start from
zero). The traffic goes through the real broker and the three streaming jobs
(available-now), exactly like production, and the settings are also written to a YAML file
so subprocesses (spark-submit, Airflow) see the same lake and durations.
"""

from __future__ import annotations

import dataclasses
import datetime
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from helpers.jobs import run_available_now
from spark_jobs.experiments.admin.metadata import add_ramps
from spark_jobs.experiments.admin.snapshot import publish_snapshot
from spark_jobs.experiments.core.periods import RampRow
from spark_jobs.experiments.traffic import DEFAULT_START_MS, HOUR_MS, TrafficSpec, produce
from spark_jobs.local.broker import EmbeddedBroker
from spark_jobs.settings import Settings, deep_merge, load_settings

DAY_MS = 24 * HOUR_MS
HISTORY_DAYS = 3
# One hour past the last day, so the final watermark closes every window of the third day.
HISTORY_DURATION_MS = HISTORY_DAYS * DAY_MS + HOUR_MS
JOB_ORDER = ("filter_events", "filter_activations", "experiment_metrics")
JOB_TIMEOUT_S = 300


@dataclass(frozen=True)
class HistoryLake:
    """What a test needs to use the history: settings, the config file, the days, the spec."""

    settings: Settings
    config_path: Path
    days: list[datetime.date]
    spec: TrafficSpec


def history_config(root: Path, bootstrap: str) -> dict[str, Any]:
    """The config tree of the history lake (small data, every duration scaled to days)."""
    return {
        "kafka": {"bootstrap": bootstrap},
        "spark": {"master": "local[2]"},
        "lake": {"root": str(root / "lake")},
        "experiments": {
            "period": "1d", "window": "1h", "lateness": "1m", "dedup_ttl": "1m",
            "cap_per_user_hour": 20,
        },
        "jobs": {"max_records_per_trigger": 50_000, "compact_every_batches": 5},
        "validation": {"start_date": "2026-01-01"},
    }


def history_spec(settings: Settings) -> TrafficSpec:
    """Few users and events: the three jobs each run in seconds on two cores."""
    return TrafficSpec.from_settings(
        settings.experiments,
        seed=23,
        start_ms=DEFAULT_START_MS,
        duration_ms=HISTORY_DURATION_MS,
        n_users=200,
        events_per_user_hour=2.0,
        activations_per_user=6.0,
        n_spammers=1,
        chunk_ms=HOUR_MS,
    )


def build_history_lake(spark: Any, root: Path) -> HistoryLake:
    """Generate the traffic, load the ramps, publish a snapshot and run the three jobs.

    The broker is the test's own and is stopped at the end; the config keeps pointing at it,
    which is fine for everything that only reads the lake.
    """
    root.mkdir(parents=True, exist_ok=True)
    config_path = root / "tideline.yaml"
    with EmbeddedBroker(port=0) as broker:
        config_path.write_text(yaml.safe_dump(history_config(root, broker.bootstrap)))
        settings = load_settings(environ={"TIDELINE_CONFIG": str(config_path)})
        spec = history_spec(settings)
        add_ramps(settings.metadata.url, [RampRow(**row) for row in spec.ramp_rows()])
        publish_snapshot(settings, spec.start_ms + spec.duration_ms, None)
        produce(spec, settings, progress=False)
        for job in JOB_ORDER:
            run_available_now(spark, settings, job, JOB_TIMEOUT_S)
    first = datetime.datetime.fromtimestamp(spec.start_ms / 1000, datetime.UTC).date()
    days = [first + datetime.timedelta(days=i) for i in range(HISTORY_DAYS)]
    return HistoryLake(settings=settings, config_path=config_path, days=days, spec=spec)


def copy_history(history: HistoryLake, dest: Path) -> HistoryLake:
    """The same history in a lake of its own under dest, for tests that write to it (or
    corrupt it) without touching the shared one; with its own YAML config file."""
    dest.mkdir(parents=True, exist_ok=True)
    lake = dest / "lake"
    shutil.copytree(history.settings.lake.root, lake)
    tree = yaml.safe_load(history.config_path.read_text())
    tree = deep_merge(tree, {"lake": {"root": str(lake)}})
    config_path = dest / "tideline.yaml"
    config_path.write_text(yaml.safe_dump(tree))
    settings = load_settings(environ={"TIDELINE_CONFIG": str(config_path)})
    return dataclasses.replace(history, settings=settings, config_path=config_path)


def recomputed_copy(spark: Any, history: HistoryLake, dest: Path) -> HistoryLake:
    """A copy with the batch recomputation of every day, as the daily DAG leaves the lake
    just before it validates."""
    from spark_jobs.experiments.recompute.recompute import recompute_day

    lake = copy_history(history, dest)
    for day in lake.days:
        recompute_day(spark, lake.settings, day)
    return lake
