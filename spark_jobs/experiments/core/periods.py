"""Ramp-ups and aggregation periods of experiment groups (CONTRACTS.md section 3), pure Python.

The metadata loader, the snapshot publisher, the activation filter and the batch
recomputation all need the same answer to "which period does this activation fall in",
so the rules live here once and nothing else re-derives them.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

GroupKey = tuple[str, str]


@dataclass(frozen=True)
class RampRow:
    """One allocation change of an experiment group (a row of the `ramps` table)."""

    experiment_hash: str
    experiment_group: str
    ramp_ts: int
    allocation_pct: float
    is_control: bool

    @property
    def group(self) -> GroupKey:
        return (self.experiment_hash, self.experiment_group)


@dataclass(frozen=True)
class Period:
    """An aggregation period [start, end) of a group, opened by the ramp-up at `start`."""

    experiment_hash: str
    experiment_group: str
    start: int
    end: int
    allocation_pct: float
    is_control: bool

    @property
    def group(self) -> GroupKey:
        return (self.experiment_hash, self.experiment_group)

    def contains(self, ts: int) -> bool:
        return self.start <= ts < self.end


def _groups_in_time_order(rows: Iterable[RampRow]) -> dict[GroupKey, list[RampRow]]:
    """Rows per group sorted by ramp_ts; `sorted` is stable, so ties keep load order."""
    groups: dict[GroupKey, list[RampRow]] = defaultdict(list)
    for row in rows:
        groups[row.group].append(row)
    return {key: sorted(groups[key], key=lambda r: r.ramp_ts) for key in sorted(groups)}


def ramp_ups(rows: Iterable[RampRow]) -> list[RampRow]:
    """Rows whose allocation is above the previous row's of the same group (first row vs 0).

    The previous row is any row, ramp-up or not, so a decrease followed by an increase
    is a ramp-up again. Output: by group, then ramp_ts, ties in load order.
    """
    result: list[RampRow] = []
    for group_rows in _groups_in_time_order(rows).values():
        previous = 0.0
        for row in group_rows:
            if row.allocation_pct > previous:
                result.append(row)
            previous = row.allocation_pct
    return result


def periods(rows: Iterable[RampRow], period_ms: int) -> list[Period]:
    """Aggregation periods: a ramp-up opens [r, r + period) unless r lies in an open one.

    Ramp-ups inside a period neither reset nor extend it; one at exactly the period end
    opens the next period (ends are exclusive). Output sorted by group, then start.
    """
    if period_ms <= 0:
        raise ValueError(f"period_ms must be positive, got {period_ms}")
    result: list[Period] = []
    current_end: dict[GroupKey, int] = {}
    for row in ramp_ups(rows):
        end = current_end.get(row.group)
        if end is not None and row.ramp_ts < end:
            continue
        period = Period(
            experiment_hash=row.experiment_hash,
            experiment_group=row.experiment_group,
            start=row.ramp_ts,
            end=row.ramp_ts + period_ms,
            allocation_pct=row.allocation_pct,
            is_control=row.is_control,
        )
        current_end[row.group] = period.end
        result.append(period)
    return result


def _sort_key(period: Period) -> tuple[str, str, int, int]:
    return (period.experiment_hash, period.experiment_group, period.start, period.end)


def snapshot_periods(
    all_periods: Iterable[Period], as_of_ms: int, lookback_ms: int | None
) -> list[Period]:
    """Periods whose ramp-up lies in (as_of - lookback, as_of]; lookback None: start <= as_of.

    Sorted by (experiment_hash, experiment_group, start) so equal inputs give equal files.
    """
    if lookback_ms is not None and lookback_ms < 0:
        raise ValueError(f"lookback_ms must not be negative, got {lookback_ms}")
    lower = None if lookback_ms is None else as_of_ms - lookback_ms
    chosen = [p for p in all_periods if p.start <= as_of_ms and (lower is None or p.start > lower)]
    return sorted(chosen, key=_sort_key)


class PeriodIndex:
    """Period lookup by (experiment, group, ts) in O(log n); built once, queried per record."""

    def __init__(self, items: Iterable[Period] = ()) -> None:
        by_group: dict[GroupKey, list[Period]] = defaultdict(list)
        for period in items:
            by_group[period.group].append(period)
        self._starts: dict[GroupKey, list[int]] = {}
        self._periods: dict[GroupKey, list[Period]] = {}
        self._max_end: dict[GroupKey, list[int]] = {}
        for key, group in by_group.items():
            ordered = sorted(group, key=_sort_key)
            self._periods[key] = ordered
            self._starts[key] = [p.start for p in ordered]
            running, max_end = [], None
            for p in ordered:
                max_end = p.end if max_end is None else max(max_end, p.end)
                running.append(max_end)
            self._max_end[key] = running
        self._size = sum(len(v) for v in self._periods.values())

    def find(self, experiment_hash: str, experiment_group: str, ts: int) -> Period | None:
        """The period with start <= ts < end, the latest-starting one if several overlap."""
        key = (experiment_hash, experiment_group)
        starts = self._starts.get(key)
        if starts is None:
            return None
        group, max_end = self._periods[key], self._max_end[key]
        i = bisect_right(starts, ts) - 1
        # Periods built by `periods` never overlap, so this loop runs at most once; the
        # running max end keeps it correct for overlapping input (e.g. a changed period).
        while i >= 0 and max_end[i] > ts:
            if group[i].end > ts:
                return group[i]
            i -= 1
        return None

    @property
    def periods(self) -> list[Period]:
        return [p for key in sorted(self._periods) for p in self._periods[key]]

    def groups(self) -> Sequence[GroupKey]:
        return sorted(self._periods)

    def __len__(self) -> int:
        return self._size

    def __bool__(self) -> bool:
        return self._size > 0

    def __repr__(self) -> str:
        return f"PeriodIndex({self._size} periods in {len(self._periods)} groups)"
