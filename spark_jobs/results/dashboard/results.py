"""The dashboard's data: each experiment's current period, judged, from `experiment_metrics`.

Reads the Delta table with delta-rs (no Spark: the dashboard must answer in milliseconds) and
the ramps from the metadata DB for the allocation the SRM check compares with. Each group's
current period is its latest one; a group's windows are paired with the control's by window
end. Results are cached per table version, so a page polling every few seconds costs one
version lookup until a new micro-batch lands.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd
from deltalake import DeltaTable

from spark_jobs.contracts.tables import TABLE_EXPERIMENT_METRICS
from spark_jobs.experiments.core.periods import RampRow
from spark_jobs.results.stats import GroupCounts
from spark_jobs.results.verdicts import ExperimentVerdict, GroupHistory, judge
from spark_jobs.settings import Settings
from spark_jobs.streaming.lake.delta import load_table

COLUMNS = [
    "experiment_hash", "experiment_group", "period_start", "event_type", "window_end",
    "is_control", "triggered_users", "propensity", "volume", "volume_sum_squares",
]


@dataclass(frozen=True)
class ExperimentResult:
    """One experiment on the dashboard: its current period and verdict."""

    experiment_hash: str
    period_start: int
    period_end: int
    latest_window_end: int
    running: bool
    verdict: ExperimentVerdict


@dataclass(frozen=True)
class Results:
    table_version: int | None
    as_of_ms: int | None  # newest window end in the table
    loaded_at_ms: int
    experiments: list[ExperimentResult]

    def find(self, experiment_hash: str) -> ExperimentResult | None:
        return next((e for e in self.experiments if e.experiment_hash == experiment_hash), None)


def metrics_table_uri(settings: Settings) -> str:
    return settings.lake.table(TABLE_EXPERIMENT_METRICS)


def allocation_at(ramps: Iterable[RampRow], experiment: str, group: str, at_ms: int
                  ) -> float | None:
    """The group's allocation in force at `at_ms` (its last ramp row by then, ties in load
    order)."""
    rows = [r for r in ramps if r.group == (experiment, group) and r.ramp_ts <= at_ms]
    return sorted(rows, key=lambda r: r.ramp_ts)[-1].allocation_pct if rows else None


def build_results(frame: pd.DataFrame, ramps: list[RampRow], settings: Settings,
                  table_version: int | None = None) -> Results:
    """Judge every experiment of a metrics frame (pure: the tests call it on made-up rows)."""
    now_ms = int(time.time() * 1000)
    if frame.empty:
        return Results(table_version, None, now_ms, [])
    as_of = int(frame["window_end"].max())
    period_ms = settings.experiments.period_ms
    planned_looks = math.ceil(period_ms / settings.experiments.window_ms) + 1
    latest = frame.groupby(["experiment_hash", "experiment_group"])["period_start"].transform("max")
    current = frame[frame["period_start"] == latest].sort_values("window_end")
    experiments = []
    for experiment, rows in current.groupby("experiment_hash", sort=True):
        histories = []
        for group, group_rows in rows.groupby("experiment_group", sort=True):
            series = {
                event: [(int(r.window_end), GroupCounts(int(r.triggered_users), int(r.propensity),
                                                        int(r.volume), int(r.volume_sum_squares)))
                        for r in event_rows.itertuples()]
                for event, event_rows in group_rows.groupby("event_type", sort=True)
            }
            last_end = int(group_rows["window_end"].max())
            histories.append(GroupHistory(
                str(group), bool(group_rows["is_control"].iloc[-1]),
                int(group_rows["period_start"].iloc[0]),
                allocation_at(ramps, str(experiment), str(group), last_end), series,
            ))
        control = [h for h in histories if h.is_control] or histories
        period_start = min(h.period_start for h in control)
        latest_end = int(rows["window_end"].max())
        experiments.append(ExperimentResult(
            str(experiment), period_start, period_start + period_ms, latest_end,
            running=period_start + period_ms > as_of,
            verdict=judge(str(experiment), histories, planned_looks, settings.stats),
        ))
    experiments.sort(key=lambda e: (not e.running, e.experiment_hash))
    return Results(table_version, as_of, now_ms, experiments)


def load_results(settings: Settings, table: DeltaTable | None = None) -> Results:
    """Read the table (the one given, already open, else the latest) and the ramps and judge
    every experiment."""
    from spark_jobs.experiments.admin.metadata import read_ramps

    table = table or load_table(metrics_table_uri(settings))
    if table is None:
        return Results(None, None, int(time.time() * 1000), [])
    frame = table.to_pyarrow_table(columns=COLUMNS).to_pandas()
    return build_results(frame, read_ramps(settings.metadata.url), settings, table.version())


class ResultsCache:
    """The latest Results, recomputed only when the table has a new version."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._results: Results | None = None

    def get(self) -> Results:
        table = load_table(metrics_table_uri(self.settings))
        version = None if table is None else table.version()
        with self._lock:
            if self._results is None or self._results.table_version != version:
                self._results = load_results(self.settings, table)
            return self._results


def as_json(value: Any) -> Any:
    """Dataclasses to plain JSON values; NaN and infinities become null."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        data = {f.name: as_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if isinstance(value, ExperimentVerdict):
            data["label"] = value.label
        return data
    if isinstance(value, dict):
        return {str(k): as_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [as_json(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
