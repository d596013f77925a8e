"""A made-up `experiment_metrics` table with known effects: dashboard and guardrail tests,
and the dashboard benchmark at production size; and its `experiment_metrics_provisional`
rows (the live totals of open windows), for the dashboard's live results.

Each window brings new triggered users to each group; a user has an event of a type with the
group's rate and then 1 + Poisson(1) of them. CUPED's pre-exposure volume x of a user is
Poisson(3 (1 - u)), u the uniform draw that decided whether they were active: its law is the
same in every group (it is pre-exposure), and it correlates with the metric. Rows are
cumulative like the real table's and the ramps go into the metadata DB, so the SRM check has
allocations to compare with. Seeded: equal arguments give equal tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa

from spark_jobs.contracts.tables import (
    EXPERIMENT_METRICS,
    PROVISIONAL_METRICS,
    TABLE_EXPERIMENT_METRICS,
    TABLE_PROVISIONAL_METRICS,
)
from spark_jobs.experiments.admin.metadata import add_ramps
from spark_jobs.experiments.core.metrics import (
    COVARIATE_COLUMNS,
    CROSSED_METRICS,
    EVENT_METRICS,
    TRIGGERED_USERS,
)
from spark_jobs.experiments.core.periods import RampRow
from spark_jobs.settings import Settings
from spark_jobs.streaming.lake.delta import upsert_rows

START_MS = 1_767_225_600_000  # 2026-01-01T00:00Z
SCHEMA = EXPERIMENT_METRICS.arrow_schema()
PROVISIONAL_SCHEMA = PROVISIONAL_METRICS.arrow_schema()


@dataclass(frozen=True)
class SyntheticExperiment:
    """rates: event type -> (control rate, treatment rate) of users with the event."""

    name: str
    rates: dict[str, tuple[float, float]]
    users_per_window: tuple[int, int] = (150, 150)
    allocation: tuple[float, float] = (50.0, 50.0)
    windows: int = 12
    groups: tuple[str, str] = field(default=("control", "treatment"))


# The dashboard tests' four experiments, one per status.
KNOWN_EFFECTS = (
    SyntheticExperiment("exp_win", {"click": (0.20, 0.30), "impression": (0.6, 0.6)}),
    SyntheticExperiment("exp_guardrail", {"click": (0.20, 0.20), "impression": (0.6, 0.5)}),
    SyntheticExperiment("exp_srm", {"click": (0.20, 0.20), "impression": (0.6, 0.6)},
                        users_per_window=(150, 190)),
    SyntheticExperiment("exp_aa", {"click": (0.20, 0.20), "impression": (0.6, 0.6)}),
)


def metric_rows(experiment: SyntheticExperiment, window_ms: int, seed: int,
                start_ms: int = START_MS, windows: int | None = None) -> pa.Table:
    """The experiment's cumulative rows for its first `windows` windows."""
    rng = np.random.default_rng(seed)
    pre_rng = np.random.default_rng(seed + 1_000_003)  # apart, so `rng` draws as before
    count = experiment.windows if windows is None else windows
    if count > experiment.windows:
        raise ValueError(f"{experiment.name} has {experiment.windows} windows, not {count}")
    updated = datetime.now(UTC)
    columns: dict[str, list] = {name: [] for name in SCHEMA.names}
    for index, group in enumerate(experiment.groups):
        for event, rates in sorted(experiment.rates.items()):
            users = experiment.users_per_window[index]
            totals = dict.fromkeys((TRIGGERED_USERS, *(m.column for m in EVENT_METRICS),
                                    *COVARIATE_COLUMNS), 0)
            for k in range(1, experiment.windows + 1):
                draw = rng.random(users)
                actions = np.where(draw < rates[index], 1 + rng.poisson(1.0, users), 0)
                totals[TRIGGERED_USERS] += users
                for metric in EVENT_METRICS:  # each user's actions all fall in one window
                    totals[metric.column] += int(np.sum(metric.per_user(actions)))
                _add_covariates(totals, pre_rng.poisson(3.0 * (1.0 - draw)), actions)
                if k > count:
                    continue
                row = {"experiment_hash": experiment.name, "experiment_group": group,
                       "period_start": start_ms, "event_type": event,
                       "window_end": start_ms + k * window_ms, "is_control": index == 0,
                       **totals, "updated_at": updated}
                for name in SCHEMA.names:
                    columns[name].append(row[name])
    return pa.Table.from_pydict(columns, schema=SCHEMA)


def _add_covariates(totals: dict[str, int], pre: np.ndarray, actions: np.ndarray) -> None:
    """CUPED's sums of these users: Σx, Σx² and Σ x·y of each crossed metric."""
    per_user = {metric.column: metric.per_user for metric in EVENT_METRICS}
    sums = (pre.sum(), (pre * pre).sum(),
            *((pre * per_user[column](actions)).sum() for column in CROSSED_METRICS))
    for column, value in zip(COVARIATE_COLUMNS, sums, strict=True):
        totals[column] += int(value)


def provisional_rows(experiment: SyntheticExperiment, window_ms: int, seed: int,
                     windows: int, watermark: int | None, start_ms: int = START_MS
                     ) -> pa.Table:
    """The experiment's provisional rows once the records of its first `windows` windows
    are in (the same series as `metric_rows` with the same seed): final rows exist up to
    `watermark`, later windows are still open."""
    final = metric_rows(experiment, window_ms, seed, start_ms, windows).to_pylist()
    last = [row for row in final if row["window_end"] == start_ms + windows * window_ms]
    rows = [{**row, "watermark": watermark} for row in last]
    return pa.Table.from_pylist(rows, schema=PROVISIONAL_SCHEMA)


def write_provisional(settings: Settings, experiments=KNOWN_EFFECTS, seed: int = 1,
                      windows: int = 1, watermark: int | None = None,
                      start_ms: int = START_MS) -> None:
    """Upsert the experiments' provisional rows after `windows` windows, as experiment_metrics
    does every micro-batch (seeds as `write_metrics`': the same series)."""
    window_ms = settings.experiments.window_ms
    tables = [provisional_rows(e, window_ms, seed + i, windows, watermark, start_ms)
              for i, e in enumerate(experiments)]
    upsert_rows(settings.lake.table(TABLE_PROVISIONAL_METRICS), pa.concat_tables(tables),
                PROVISIONAL_METRICS.primary_key)


def add_synthetic_ramps(settings: Settings, experiments=KNOWN_EFFECTS,
                        start_ms: int = START_MS) -> None:
    """The experiments' ramps at their period start, for the SRM check."""
    add_ramps(settings.metadata.url, [
        RampRow(e.name, group, start_ms, e.allocation[i], i == 0)
        for e in experiments for i, group in enumerate(e.groups)
    ])


def write_metrics(settings: Settings, experiments=KNOWN_EFFECTS, seed: int = 1,
                  windows: int | None = None, start_ms: int = START_MS, ramps: bool = True
                  ) -> None:
    """Upsert the experiments' rows (first `windows` windows; a later call with more windows
    extends the same series, like a streaming job) and load their ramps once."""
    window_ms = settings.experiments.window_ms
    tables = [metric_rows(e, window_ms, seed + i, start_ms, windows)
              for i, e in enumerate(experiments)]
    upsert_rows(settings.lake.table(TABLE_EXPERIMENT_METRICS), pa.concat_tables(tables),
                EXPERIMENT_METRICS.primary_key)
    if ramps:
        add_synthetic_ramps(settings, experiments, start_ms)

