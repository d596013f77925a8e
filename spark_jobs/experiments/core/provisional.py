"""Live totals per (experiment, group, period, event type), windows still open included: the
rows of experiment_metrics_provisional, fed with the users' provisional deltas
(core/user_metrics.UserMetricsState.provisional).

A row holds what every accepted record so far says: triggered_users counts the users with an
accepted activation in the group period, each counted metric sums `per_user(c)` over them,
c = the user's clean events of the type with first_trigger <= ts < period end, pending ones
included. Every batch that brings deltas gives one row per critical event type of every open
group period (zeros included, like the final rows), so a reader's newest commit shows them
all. A group is dropped once the watermark passed its period's last window: its last row then
equals the final row of that window, and stays in the table.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, make_dataclass

from spark_jobs.experiments.core.metrics import COUNT_COLUMNS, LIVE_METRIC_COLUMNS, NO_COUNTS
from spark_jobs.experiments.core.tumbling_windows import period_last_window
from spark_jobs.experiments.core.user_metrics import Delta, GroupKey

# One computed row of experiment_metrics_provisional (every column but the writer's watermark
# and updated_at), generated from LIVE_METRIC_COLUMNS like group_windows.MetricRow.
ProvisionalRow = make_dataclass(
    "ProvisionalRow",
    [
        ("experiment_hash", str), ("experiment_group", str), ("period_start", int),
        ("event_type", str), ("is_control", bool),
        *((column, int) for column in LIVE_METRIC_COLUMNS),
    ],
    frozen=True, slots=True,
)
ProvisionalRow.__module__ = __name__


@dataclass
class LiveGroup:
    """Running live totals of one group period."""

    is_control: bool
    triggered: int = 0
    totals: dict[str, list[int]] = field(default_factory=dict)  # type -> counts so far


class ProvisionalTotals:
    """Folds provisional deltas into live totals; one row per open group period and type."""

    def __init__(self, period_ms: int, window_ms: int, event_types: Iterable[str]) -> None:
        self.period_ms = period_ms
        self.window_ms = window_ms
        self.event_types = tuple(event_types)
        self.groups: dict[GroupKey, LiveGroup] = {}

    @classmethod
    def resume(
        cls, period_ms: int, window_ms: int, event_types: Iterable[str],
        rows: Iterable[ProvisionalRow],
    ) -> ProvisionalTotals:
        """The totals from the rows of the lineage's newest commit (which holds every group
        open then); groups closed since are dropped by the next `apply`."""
        totals = cls(period_ms, window_ms, event_types)
        for row in rows:
            key = (row.experiment_hash, row.experiment_group, row.period_start)
            group = totals.groups.setdefault(key, LiveGroup(row.is_control))
            group.triggered = row.triggered_users
            group.totals[row.event_type] = [getattr(row, c) for c in COUNT_COLUMNS]
        return totals

    def apply(self, deltas: Iterable[Delta], watermark_ms: int, fold: bool = True
              ) -> list[ProvisionalRow]:
        """Fold in a batch's provisional deltas and return every open group's rows (none
        when the batch brought no delta); `fold` False for a batch whose deltas the totals
        already hold (a replay). Groups whose period's last window is out are dropped after
        their rows are given."""
        changed = False
        for delta in deltas if fold else ():
            changed = True
            key = (delta.experiment_hash, delta.experiment_group, delta.period_start)
            group = self.groups.get(key)
            if group is None:
                group = self.groups[key] = LiveGroup(delta.is_control)
            if delta.event_type is None:
                group.triggered += delta.triggered
            else:
                totals = group.totals.setdefault(delta.event_type, list(NO_COUNTS))
                for index, count in enumerate(delta.counts):
                    totals[index] += count
        rows = [] if not changed else [
            ProvisionalRow(key[0], key[1], key[2], event_type, group.is_control,
                           group.triggered, *group.totals.get(event_type, NO_COUNTS))
            for key, group in sorted(self.groups.items())
            for event_type in self.event_types
        ]
        for key in [k for k in self.groups if self._closed(k, watermark_ms)]:
            del self.groups[key]
        return rows

    def _closed(self, key: GroupKey, watermark_ms: int) -> bool:
        return period_last_window(key[2], self.period_ms, self.window_ms) <= watermark_ms
