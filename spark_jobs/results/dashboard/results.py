"""The dashboard's data: each experiment's current period, judged, from `experiment_metrics`,
and its live statistics from `experiment_metrics_provisional` (live.py).

Reads the Delta table with delta-rs (no Spark: the dashboard must answer in milliseconds) and
the ramps from the metadata DB for the allocation the SRM check compares with. Each group's
current period is its latest one; a group's windows are paired with the control's by window
end. Results are cached per version of the two tables, so a page polling every few seconds
costs two version lookups until a new micro-batch lands.
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

from spark_jobs.contracts.tables import TABLE_EXPERIMENT_METRICS, TABLE_PROVISIONAL_METRICS
from spark_jobs.experiments.core.metrics import COVARIATE_COLUMNS
from spark_jobs.experiments.core.periods import RampRow
from spark_jobs.results.dashboard.live import (
    PROVISIONAL_COLUMNS,
    LiveResult,
    counts,
    live_histories,
)
from spark_jobs.results.verdicts import ExperimentVerdict, GroupHistory, judge
from spark_jobs.settings import Settings
from spark_jobs.streaming.lake.delta import columns_present, load_table

COLUMNS = [
    "experiment_hash", "experiment_group", "period_start", "event_type", "window_end",
    "is_control", "triggered_users", "propensity", "volume", "volume_sum_squares",
    *COVARIATE_COLUMNS,
]
NO_PROVISIONAL_ROWS = pd.DataFrame(columns=PROVISIONAL_COLUMNS)
NO_FINAL_WINDOW = "no window is final yet: live results only"


@dataclass(frozen=True)
class ExperimentResult:
    """One experiment on the dashboard: its current period, verdict and live statistics.
    Without a final window yet (`final` false) the verdict says so and only `live` has
    results."""

    experiment_hash: str
    period_start: int
    period_end: int
    latest_window_end: int | None
    running: bool
    verdict: ExperimentVerdict
    final: bool = True
    live: LiveResult | None = None


@dataclass(frozen=True)
class Results:
    table_version: int | None
    as_of_ms: int | None  # newest window end in the table
    loaded_at_ms: int
    experiments: list[ExperimentResult]
    live_version: int | None = None  # of experiment_metrics_provisional
    live_updated_at_ms: int | None = None  # its newest row's update

    def find(self, experiment_hash: str) -> ExperimentResult | None:
        return next((e for e in self.experiments if e.experiment_hash == experiment_hash), None)


def metrics_table_uri(settings: Settings) -> str:
    return settings.lake.table(TABLE_EXPERIMENT_METRICS)


def provisional_table_uri(settings: Settings) -> str:
    return settings.lake.table(TABLE_PROVISIONAL_METRICS)


def allocation_at(ramps: Iterable[RampRow], experiment: str, group: str, at_ms: int
                  ) -> float | None:
    """The group's allocation in force at `at_ms` (its last ramp row by then, ties in load
    order)."""
    rows = [r for r in ramps if r.group == (experiment, group) and r.ramp_ts <= at_ms]
    return sorted(rows, key=lambda r: r.ramp_ts)[-1].allocation_pct if rows else None


def _final_histories(experiment: str, rows: pd.DataFrame, ramps: list[RampRow]
                     ) -> list[GroupHistory]:
    """Each group's current-period series of an experiment's final rows (by window end)."""
    histories = []
    for group, group_rows in rows.groupby("experiment_group", sort=True):
        series = {
            event: [(int(r.window_end), counts(r)) for r in event_rows.itertuples()]
            for event, event_rows in group_rows.groupby("event_type", sort=True)
        }
        last_end = int(group_rows["window_end"].max())
        histories.append(GroupHistory(
            str(group), bool(group_rows["is_control"].iloc[-1]),
            int(group_rows["period_start"].iloc[0]),
            allocation_at(ramps, experiment, str(group), last_end), series,
        ))
    return histories


def _period_start(histories: list[GroupHistory]) -> int:
    control = [h for h in histories if h.is_control] or histories
    return min(h.period_start for h in control)


def _live(experiment: str, histories: list[GroupHistory], rows: pd.DataFrame | None,
          ramps: list[RampRow], settings: Settings, planned_looks: int) -> LiveResult | None:
    if rows is None:
        return None
    found = live_histories(histories, rows, settings.experiments.window_ms,
                           settings.experiments.period_ms,
                           lambda group, at: allocation_at(ramps, experiment, group, at))
    if found is None:
        return None
    live, look_end = found
    watermarks = rows["watermark"].dropna()
    return LiveResult(_period_start(live), look_end, _ms(rows["updated_at"].max()),
                      int(watermarks.max()) if len(watermarks) else None,
                      judge(experiment, live, planned_looks, settings.stats))


def _ms(timestamp: Any) -> int:
    return int(pd.Timestamp(timestamp).timestamp() * 1000)


def _experiment(experiment: str, final: pd.DataFrame | None, provisional: pd.DataFrame | None,
                ramps: list[RampRow], settings: Settings, as_of: int | None,
                known: ExperimentVerdict | None = None) -> ExperimentResult | None:
    """One experiment's result; one known only by its provisional rows has its live
    statistics and a verdict saying no window is final yet. `known`: its final verdict
    from the same final rows, when only the provisional ones changed."""
    period_ms = settings.experiments.period_ms
    planned_looks = math.ceil(period_ms / settings.experiments.window_ms) + 1
    histories = [] if final is None else _final_histories(experiment, final, ramps)
    live = _live(experiment, histories, provisional, ramps, settings, planned_looks)
    if histories:
        period_start = _period_start(histories)
        return ExperimentResult(
            experiment, period_start, period_start + period_ms,
            int(final["window_end"].max()),  # type: ignore[index]
            running=period_start + period_ms > (as_of or 0),
            verdict=known or judge(experiment, histories, planned_looks, settings.stats),
            live=live)
    if live is None:
        return None
    waiting = dataclasses.replace(judge(experiment, [], planned_looks, settings.stats),
                                  reason=NO_FINAL_WINDOW)
    reference = as_of if as_of is not None else live.watermark
    return ExperimentResult(
        experiment, live.period_start, live.period_start + period_ms, None,
        running=reference is None or live.period_start + period_ms > reference,
        verdict=waiting, final=False, live=live)


def _by_experiment(frame: pd.DataFrame) -> dict[str, pd.DataFrame]:
    return {str(e): rows for e, rows in frame.groupby("experiment_hash", sort=True)}


def build_results(frame: pd.DataFrame, ramps: list[RampRow], settings: Settings,
                  table_version: int | None = None, provisional: pd.DataFrame | None = None,
                  live_version: int | None = None, previous: Results | None = None) -> Results:
    """Judge every experiment of a metrics frame and, live, of a provisional one (pure: the
    tests call it on made-up rows). The final verdicts of `previous` are kept when it comes
    from the same table version: a new provisional version costs only the live verdicts."""
    now_ms = int(time.time() * 1000)
    provisional = NO_PROVISIONAL_ROWS if provisional is None else provisional
    as_of = None if frame.empty else int(frame["window_end"].max())
    current = frame
    if not frame.empty:
        latest = frame.groupby(["experiment_hash", "experiment_group"])["period_start"].transform(
            "max")
        current = frame[frame["period_start"] == latest].sort_values("window_end")
    finals, lives = _by_experiment(current), _by_experiment(provisional)
    known = {} if previous is None or table_version is None or (
        previous.table_version != table_version) else {
        e.experiment_hash: e.verdict for e in previous.experiments if e.final}
    found = [_experiment(e, finals.get(e), lives.get(e), ramps, settings, as_of, known.get(e))
             for e in sorted(set(finals) | set(lives))]
    experiments = sorted((e for e in found if e is not None),
                         key=lambda e: (not e.running, e.experiment_hash))
    updated = None if provisional.empty else _ms(provisional["updated_at"].max())
    return Results(table_version, as_of, now_ms, experiments, live_version, updated)


def _frame(table: DeltaTable | None, columns: list[str]) -> pd.DataFrame:
    """The columns of a table (a column an older table lacks reads as missing)."""
    if table is None:
        return pd.DataFrame(columns=columns)
    frame = table.to_pyarrow_table(columns=columns_present(table, columns)).to_pandas()
    return frame.reindex(columns=columns)


def load_results(settings: Settings, table: DeltaTable | None = None,
                 provisional: DeltaTable | None = None, previous: Results | None = None
                 ) -> Results:
    """Read the tables (the ones given, already open, else the latest; a missing one has no
    rows) and the ramps, and judge every experiment (see `build_results` for `previous`)."""
    from spark_jobs.experiments.admin.metadata import read_ramps

    table = table or load_table(metrics_table_uri(settings))
    provisional = provisional or load_table(provisional_table_uri(settings))
    if table is None and provisional is None:
        return Results(None, None, int(time.time() * 1000), [])
    return build_results(
        _frame(table, COLUMNS), read_ramps(settings.metadata.url), settings,
        None if table is None else table.version(), _frame(provisional, PROVISIONAL_COLUMNS),
        None if provisional is None else provisional.version(), previous)


class ResultsCache:
    """The latest Results, recomputed only when one of the tables has a new version."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._results: Results | None = None

    def get(self) -> Results:
        table = load_table(metrics_table_uri(self.settings))
        provisional = load_table(provisional_table_uri(self.settings))
        versions = tuple(None if t is None else t.version() for t in (table, provisional))
        with self._lock:
            if self._results is None or (self._results.table_version,
                                         self._results.live_version) != versions:
                self._results = load_results(self.settings, table, provisional, self._results)
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
