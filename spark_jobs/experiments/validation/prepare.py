"""The three checks' frames for one case and day, read from the lake (see checks.py).

Each preparer returns the frame a GX suite judges, how bad each row is (positive means
violated, so the worst row can be reported) and the details stored with the verdict.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from spark_jobs.contracts.tables import (
    TABLE_BATCH_METRICS,
    TABLE_EXPERIMENT_METRICS,
    TABLE_RAW_ACTIVATIONS,
    TABLE_RAW_EVENTS,
)
from spark_jobs.experiments.admin.metadata import read_ramps
from spark_jobs.experiments.core.periods import GroupKey, Period, RampRow
from spark_jobs.experiments.core.tumbling_windows import period_last_window, window_end
from spark_jobs.experiments.validation import inputs
from spark_jobs.experiments.validation.cases import check_case, groups_of_case, later_periods
from spark_jobs.experiments.validation.checks import (
    KEY,
    drift_rows,
    first_windows,
    in_groups,
    monotone_pairs,
    reset_bounds,
)
from spark_jobs.experiments.validation.suites import DRIFT, MONOTONE, RESET
from spark_jobs.settings import Settings
from spark_jobs.streaming.days import day_bounds_ms


def iso(ms: int | None) -> str | None:
    """Epoch ms as ISO 8601 UTC text, for people reading details and alerts."""
    if ms is None:
        return None
    moment = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    return moment.isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class CaseScope:
    """What one validation covers: a case, its groups, and the day's window ends."""

    case: str
    day: datetime.date
    groups: list[GroupKey]
    ramps: list[RampRow]
    after_ms: int
    until_ms: int

    def base_details(self) -> dict[str, Any]:
        details: dict[str, Any] = {
            "case": self.case,
            "logical_date": self.day.isoformat(),
            "window_ends": [iso(self.after_ms), iso(self.until_ms)],
            "groups": [f"{x}/{g}" for x, g in self.groups],
        }
        if not self.groups:
            details["note"] = f"no experiment group is in case {self.case} on this day"
        return details


@dataclass(frozen=True)
class PreparedCheck:
    """A check's frame, how bad each row is (positive = violated), and what to report."""

    check: str
    frame: pd.DataFrame
    severity: pd.Series
    details: dict[str, Any]
    parameters: dict[str, Any]


def _monotone(settings: Settings, scope: CaseScope) -> PreparedCheck:
    window = settings.experiments.window_ms
    rows = inputs.metric_rows(
        settings.lake.table(TABLE_EXPERIMENT_METRICS), scope.after_ms - window, scope.until_ms
    )
    frame = monotone_pairs(in_groups(rows, scope.groups), scope.after_ms, scope.until_ms)
    severity = frame["previous_value"] - frame["value"] if len(frame) else pd.Series(dtype=float)
    return PreparedCheck(MONOTONE, frame, severity, scope.base_details(), {})


def _reramped_periods(settings: Settings, scope: CaseScope) -> list[Period]:
    """Later periods whose first window can end on this day."""
    experiments = settings.experiments
    return [
        p for p in later_periods(scope.ramps, experiments.period_ms, scope.until_ms, scope.groups)
        if window_end(p.start, experiments.window_ms) <= scope.until_ms
        and period_last_window(p.start, experiments.period_ms, experiments.window_ms)
        > scope.after_ms
    ]


def _reset(settings: Settings, scope: CaseScope) -> PreparedCheck:
    candidates = _reramped_periods(settings, scope)
    rows = inputs.metric_rows(
        settings.lake.table(TABLE_EXPERIMENT_METRICS), 0, scope.until_ms,
        period_starts=[p.start for p in candidates],
    )
    first = first_windows(in_groups(rows, scope.groups), scope.after_ms, scope.until_ms)
    if first.empty:
        events = pd.DataFrame(columns=inputs.RAW_EVENT_COLUMNS)
        activations = pd.DataFrame(columns=inputs.RAW_ACTIVATION_COLUMNS)
    else:
        since, until = int(first["period_start"].min()), int(first["window_end"].max())
        events = inputs.raw_rows(
            settings.lake.table(TABLE_RAW_EVENTS), inputs.RAW_EVENT_COLUMNS, since, until
        )
        activations = inputs.raw_rows(
            settings.lake.table(TABLE_RAW_ACTIVATIONS), inputs.RAW_ACTIVATION_COLUMNS,
            since, until,
        )
    frame = reset_bounds(first, events, activations)
    severity = frame["value"] - frame["raw_bound"] if len(frame) else pd.Series(dtype=float)
    details = scope.base_details()
    details["reramped_periods"] = [
        {"experiment_hash": p.experiment_hash, "experiment_group": p.experiment_group,
         "period_start": iso(p.start)}
        for p in candidates
    ]
    if frame.empty:
        details.setdefault("note", "no re-ramped period has its first window on this day")
    return PreparedCheck(RESET, frame, severity, details, {})


def _distinct_rows(frame: pd.DataFrame) -> int:
    return len(frame.drop_duplicates(KEY))


def _drift(settings: Settings, scope: CaseScope) -> PreparedCheck:
    """Every window of the day. A batch window the streaming table lacks counts as drift 1,
    whatever the reason (a stalled job, lost rows, a day validated before the job closed it;
    the DAG waits for the job's watermark first, see `readiness.day_closed`)."""
    streaming = in_groups(
        inputs.metric_rows(
            settings.lake.table(TABLE_EXPERIMENT_METRICS), scope.after_ms, scope.until_ms
        ),
        scope.groups,
    )
    batch = in_groups(
        inputs.metric_rows(
            settings.lake.table(TABLE_BATCH_METRICS), scope.after_ms, scope.until_ms
        ),
        scope.groups,
    )
    frame = drift_rows(streaming, batch, scope.after_ms, scope.until_ms)
    watermark = inputs.streaming_watermark_ms(settings)
    details = scope.base_details()
    details["streaming_watermark"] = iso(watermark)
    details["max_drift_allowed"] = settings.validation.max_drift
    details["rows_only_in_streaming"] = _distinct_rows(frame[frame["batch"].isna()])
    details["rows_only_in_batch"] = _distinct_rows(frame[frame["streaming"].isna()])
    details["duplicate_streaming_keys"] = int(streaming.duplicated(KEY).sum())
    return PreparedCheck(
        DRIFT, frame, frame["drift"], details, {"max_drift": settings.validation.max_drift}
    )


PREPARERS: tuple[Callable[[Settings, CaseScope], PreparedCheck], ...] = (
    _monotone, _reset, _drift,
)


def case_scope(settings: Settings, day: datetime.date, case: str) -> CaseScope:
    """The case's groups from the ramps known by the end of the day."""
    after_ms, until_ms = day_bounds_ms(day)
    ramps = read_ramps(settings.metadata.url)
    groups = groups_of_case(ramps, settings.experiments.period_ms, until_ms, check_case(case))
    return CaseScope(case, day, groups, ramps, after_ms, until_ms)
