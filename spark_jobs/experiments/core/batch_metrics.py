"""Cumulative window rows of one group period from all of its per-window deltas at once.

The daily batch recomputation knows every delta of a group period up front (it is not fed
micro-batch by micro-batch), so it asks the same numerator/denominator computer the
streaming job uses (`GroupWindows`) for the rows of a range of window ends. Sharing that
code keeps "contiguous from the first trigger's window, zeros included, cumulative to
min(W, period end)" defined once; the independent pandas reference in the tests guards it.
"""

from __future__ import annotations

from collections.abc import Iterable

from spark_jobs.experiments.core.group_windows import GroupWindows, MetricRow
from spark_jobs.experiments.core.periods import Period
from spark_jobs.experiments.core.tumbling_windows import period_last_window, window_end
from spark_jobs.experiments.core.user_metrics import Delta


def window_rows_between(
    deltas: Iterable[Delta],
    period_ms: int,
    window_ms: int,
    event_types: Iterable[str],
    after_ms: int,
    until_ms: int,
) -> list[MetricRow]:
    """The rows with after_ms < window_end <= until_ms, cumulative from each period start.

    `deltas` must be all contributions up to until_ms (earlier windows included), since every
    row is a running total; until_ms acts as the watermark that closes the windows.
    """
    if until_ms < after_ms:
        raise ValueError(f"empty range: until_ms {until_ms} is before after_ms {after_ms}")
    windows = GroupWindows(period_ms, window_ms, event_types)
    closed = [d for d in deltas if d.window_end <= until_ms]
    return [row for row in windows.apply(closed, until_ms) if row.window_end > after_ms]


def periods_with_windows_in(
    periods: Iterable[Period], period_ms: int, window_ms: int, after_ms: int, until_ms: int
) -> list[Period]:
    """Periods owning at least one window end W with after_ms < W <= until_ms.

    A period [s, s + period) owns the windows from the one holding s to the one holding its
    last millisecond; whether a row is written also needs a trigger, which the data decides.
    """
    return [
        p for p in periods
        if window_end(p.start, window_ms) <= until_ms
        and period_last_window(p.start, period_ms, window_ms) > after_ms
    ]
