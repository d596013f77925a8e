"""Cumulative metric rows per (experiment, group, period, event type, window): the seed's
Numerator/Denominator computers, fed with the per-user deltas of closed windows.

Counts are cumulative from the period start to E = min(W, period end). Every group with a
counted first trigger gets a contiguous run of window rows, from the window of its first
trigger to the last window the watermark has closed (or the period's last window), for every
critical event type, zeros included. Once the period's last window is out, the group is
dropped, so this state does not grow with the number of past periods.

The counted metrics are generic here (core/metrics.py): running totals are one list per event
type, in EVENT_METRICS order, and a row carries them under their column names; CUPED's sums
(COVARIATE_COLUMNS) run beside them the same way.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, make_dataclass

from spark_jobs.experiments.core.metrics import (
    COUNT_COLUMNS,
    COVARIATE_COLUMNS,
    METRIC_COLUMNS,
    NO_COUNTS,
    NO_COVARIATES,
)
from spark_jobs.experiments.core.tumbling_windows import last_closed_window, period_last_window
from spark_jobs.experiments.core.user_metrics import Delta, GroupKey


class ConsistencyError(RuntimeError):
    """A delta for a window already emitted: the streaming invariants were broken."""


# One computed row of experiment_metrics (every column but the writer's updated_at): the key,
# is_control, then the metric columns in METRIC_COLUMNS order, generated so that a new metric
# needs no edit here (tests/contracts/test_tables.py holds it to the table's columns).
MetricRow = make_dataclass(
    "MetricRow",
    [
        ("experiment_hash", str), ("experiment_group", str), ("period_start", int),
        ("event_type", str), ("window_end", int), ("is_control", bool),
        *((column, int) for column in METRIC_COLUMNS),
    ],
    frozen=True, slots=True,
)
MetricRow.__module__ = __name__


@dataclass
class GroupProgress:
    """Running totals of one group period and the last window end already written."""

    is_control: bool
    next_window: int
    triggered: int = 0
    totals: dict[str, list[int]] = field(default_factory=dict)  # type -> counts so far
    covariates: dict[str, list[int]] = field(default_factory=dict)  # type -> CUPED's sums


class GroupWindows:
    """Turns per-window deltas into cumulative, contiguous, final window rows."""

    def __init__(
        self, period_ms: int, window_ms: int, event_types: Iterable[str],
        groups: dict[GroupKey, GroupProgress] | None = None,
    ) -> None:
        self.period_ms = period_ms
        self.window_ms = window_ms
        self.event_types = tuple(event_types)
        self.groups: dict[GroupKey, GroupProgress] = groups or {}

    @classmethod
    def resume(
        cls, period_ms: int, window_ms: int, event_types: Iterable[str],
        rows: Iterable[MetricRow],
    ) -> GroupWindows:
        """Rebuild the running totals from rows already written (the newest window per group)."""
        builder = cls(period_ms, window_ms, event_types)
        latest: dict[GroupKey, int] = {}
        rows = list(rows)
        for row in rows:
            key = (row.experiment_hash, row.experiment_group, row.period_start)
            latest[key] = max(latest.get(key, row.window_end), row.window_end)
        for row in rows:
            key = (row.experiment_hash, row.experiment_group, row.period_start)
            if row.window_end != latest[key]:
                continue
            if latest[key] >= period_last_window(key[2], period_ms, window_ms):
                continue
            progress = builder.groups.setdefault(
                key, GroupProgress(row.is_control, row.window_end + window_ms)
            )
            progress.triggered = row.triggered_users
            progress.totals[row.event_type] = [getattr(row, c) for c in COUNT_COLUMNS]
            # a row written before CUPED's columns existed reads them as null: 0
            progress.covariates[row.event_type] = [getattr(row, c) or 0
                                                   for c in COVARIATE_COLUMNS]
        return builder

    def apply(self, deltas: Iterable[Delta], watermark_ms: int) -> list[MetricRow]:
        """Fold in the deltas of this micro-batch and emit every newly closed window."""
        by_window: dict[tuple[GroupKey, int], list[Delta]] = {}
        fresh: set[GroupKey] = set()
        for delta in deltas:
            key = (delta.experiment_hash, delta.experiment_group, delta.period_start)
            progress = self.groups.get(key)
            if progress is None:
                progress = GroupProgress(delta.is_control, delta.window_end)
                self.groups[key] = progress
                fresh.add(key)
            elif delta.window_end < progress.next_window:
                if key not in fresh:
                    raise ConsistencyError(
                        f"delta for window {delta.window_end} of {key} arrived after that "
                        f"window was written (next window {progress.next_window})"
                    )
                progress.next_window = delta.window_end
            by_window.setdefault((key, delta.window_end), []).append(delta)

        closed = last_closed_window(watermark_ms, self.window_ms)
        rows: list[MetricRow] = []
        for key in sorted(self.groups):
            rows.extend(self._emit_until(key, closed, by_window))
        return rows

    def _emit_until(
        self, key: GroupKey, closed: int, by_window: dict[tuple[GroupKey, int], list[Delta]]
    ) -> list[MetricRow]:
        progress = self.groups[key]
        last = min(closed, period_last_window(key[2], self.period_ms, self.window_ms))
        rows: list[MetricRow] = []
        window = progress.next_window
        while window <= last:
            for delta in by_window.get((key, window), ()):
                if delta.event_type is None:
                    progress.triggered += delta.triggered
                else:
                    _add(progress.totals, delta.event_type, delta.counts)
                    _add(progress.covariates, delta.event_type, delta.covariates)
            for event_type in self.event_types:
                rows.append(
                    MetricRow(
                        key[0], key[1], key[2], event_type, window, progress.is_control,
                        progress.triggered, *progress.totals.get(event_type, NO_COUNTS),
                        *progress.covariates.get(event_type, NO_COVARIATES),
                    )
                )
            window += self.window_ms
        progress.next_window = window
        if window > period_last_window(key[2], self.period_ms, self.window_ms):
            del self.groups[key]
        return rows


def _add(totals: dict[str, list[int]], event_type: str, growth: tuple[int, ...]) -> None:
    """Add one delta's growth to an event type's running sums."""
    if any(growth):
        sums = totals.setdefault(event_type, [0] * len(growth))
        for index, value in enumerate(growth):
            sums[index] += value
