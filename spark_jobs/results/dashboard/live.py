"""Live results: each experiment judged with the totals of its open windows as one more look.

`experiment_metrics_provisional` holds, per group period and event type, every record
accepted so far, windows still open included. The live verdict is `judge` (the statistics of
the final verdict) on each group's final looks plus that provisional look: the mSPRT stays
valid (it is always valid, a look more or less), and an experiment with no final window yet
has results at once. The final rows stay the verdict of record; the page marks these as
provisional. A provisional look that adds nothing (each row equals its group's latest final
row: no record since, or the period is over) is dropped, so the page shows no duplicate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from spark_jobs.experiments.core.metrics import COVARIATE_COLUMNS
from spark_jobs.experiments.core.tumbling_windows import period_last_window, window_end
from spark_jobs.results.stats import GroupCounts
from spark_jobs.results.verdicts import ExperimentVerdict, GroupHistory

PROVISIONAL_COLUMNS = [
    "experiment_hash", "experiment_group", "period_start", "event_type", "is_control",
    "triggered_users", "propensity", "volume", "volume_sum_squares", "watermark", "updated_at",
]
Allocation = Callable[[str, int], float | None]  # (group, at_ms) -> allocation in force


@dataclass(frozen=True)
class LiveResult:
    """An experiment's live statistics, from its provisional rows."""

    period_start: int  # of the live look's control group
    look_end: int  # where the live look sits on the time axis: the first window still open
    updated_at_ms: int  # the newest update of the experiment's provisional rows
    watermark: int | None  # final rows exist up to this event time (ms)
    verdict: ExperimentVerdict


def counts(row: Any) -> GroupCounts:
    """A metrics row's (final or provisional) counts, with CUPED's sums where the row has
    them (final rows written since they exist)."""
    pre = tuple(getattr(row, column, None) for column in COVARIATE_COLUMNS)
    has_pre = all(value is not None and not pd.isna(value) for value in pre)
    return GroupCounts(int(row.triggered_users), int(row.propensity), int(row.volume),
                       int(row.volume_sum_squares),
                       tuple(int(value) for value in pre) if has_pre else None)


@dataclass(frozen=True)
class _GroupLive:
    """One group's current period: its final series and its provisional counts per event."""

    group: str
    is_control: bool
    period_start: int
    final: dict[str, list[tuple[int, GroupCounts]]]
    provisional: dict[str, GroupCounts]

    def adds_something(self) -> bool:
        """True when a provisional row differs from the latest final row of its event type."""
        return any(not self.final.get(event) or self.final[event][-1][1] != value
                   for event, value in self.provisional.items())


def _group_lives(final: Sequence[GroupHistory], provisional: pd.DataFrame) -> list[_GroupLive]:
    """Per group, its latest period among the final and the provisional rows; a side whose
    latest period is older (a new period began) contributes nothing."""
    finals = {h.group: h for h in final}
    latest = provisional.groupby("experiment_group")["period_start"].transform("max")
    rows = provisional[provisional["period_start"] == latest]
    by_group = {str(g): r for g, r in rows.groupby("experiment_group", sort=True)}
    lives = []
    for group in sorted(set(finals) | set(by_group)):
        history, live_rows = finals.get(group), by_group.get(group)
        periods = [h.period_start for h in (history,) if h is not None]
        periods += [] if live_rows is None else [int(live_rows["period_start"].iloc[0])]
        period = max(periods)
        series = ({e: list(s) for e, s in history.series.items()}
                  if history is not None and history.period_start == period else {})
        points = ({} if live_rows is None or int(live_rows["period_start"].iloc[0]) != period
                  else {str(r.event_type): counts(r) for r in live_rows.itertuples()})
        is_control = (history.is_control if history is not None
                      else bool(live_rows["is_control"].iloc[-1]))
        lives.append(_GroupLive(group, is_control, period, series, points))
    return lives


def live_look_end(lives: Sequence[_GroupLive], watermark: int | None, window_ms: int,
                  period_ms: int) -> int:
    """The end of the first window still open: after the watermark and every final look,
    within the latest period's last window."""
    after = [watermark] if watermark is not None else []
    after += [s[-1][0] for g in lives for s in g.final.values() if s]
    after += [g.period_start for g in lives]
    last = max(period_last_window(g.period_start, period_ms, window_ms) for g in lives)
    return min(window_end(max(after), window_ms), last)


def live_histories(final: Sequence[GroupHistory], provisional: pd.DataFrame, window_ms: int,
                   period_ms: int, allocation: Allocation
                   ) -> tuple[list[GroupHistory], int] | None:
    """Each group's history with its provisional look appended (the experiment's
    provisional rows given), and where that look sits; None when it adds nothing."""
    if provisional.empty:
        return None
    lives = _group_lives(final, provisional)
    if not any(g.adds_something() for g in lives):
        return None
    watermarks = provisional["watermark"].dropna()
    look_end = live_look_end(lives, int(watermarks.max()) if len(watermarks) else None,
                             window_ms, period_ms)
    histories = []
    for g in lives:
        series = {}
        for event in sorted(set(g.final) | set(g.provisional)):
            looks = [look for look in g.final.get(event, []) if look[0] < look_end]
            if event in g.provisional:
                looks.append((look_end, g.provisional[event]))
            series[event] = looks
        histories.append(GroupHistory(g.group, g.is_control, g.period_start,
                                      allocation(g.group, look_end), series))
    return histories, look_end
