"""The pure half of the batch recomputation: day bounds, periods of a day, cumulative rows."""

from __future__ import annotations

import datetime

import pytest

from spark_jobs.experiments.core.batch_metrics import (
    periods_with_windows_in,
    window_rows_between,
)
from spark_jobs.experiments.core.metrics import counts_of
from spark_jobs.experiments.core.periods import Period
from spark_jobs.experiments.core.user_metrics import Delta
from spark_jobs.streaming.days import day_bounds_ms

H = 3_600_000
TYPES = ("click", "save")


def test_a_day_owns_the_window_ends_after_its_midnight_up_to_the_next():
    start, end = day_bounds_ms(datetime.date(2026, 1, 2))
    assert start == 1_767_312_000_000  # 2026-01-02T00:00:00Z
    assert end - start == 24 * H


def _period(start: int, period: int) -> Period:
    return Period("x", "g", start, start + period, 10.0, False)


def test_periods_with_windows_in_keeps_those_overlapping_the_range():
    period = 4 * H
    before = _period(0, period)  # windows end 1h..4h
    touching = _period(H + 1, period)  # windows end 2h..6h
    after = _period(10 * H, period)  # first window ends 11h
    chosen = periods_with_windows_in([before, touching, after], period, H, 4 * H, 10 * H)
    assert chosen == [touching]
    # the window ending exactly at `until` belongs to the range; one ending at `after` does not
    assert periods_with_windows_in([after], period, H, 0, 11 * H) == [after]
    assert periods_with_windows_in([before], period, H, 4 * H, 8 * H) == []


def _deltas(start: int) -> list[Delta]:
    return [
        Delta("x", "g", start, True, None, 1 * H, triggered=2),
        Delta("x", "g", start, True, "click", 2 * H,
              counts=counts_of(volume=3, propensity=2, volume_sum_squares=5)),
        Delta("x", "g", start, True, None, 3 * H, triggered=1),
        Delta("x", "g", start, True, "click", 4 * H,
              counts=counts_of(volume=1, propensity=0, volume_sum_squares=5)),
    ]


def _values(rows, event_type):
    return [
        (r.window_end // H, r.triggered_users, r.volume, r.propensity, r.volume_sum_squares)
        for r in rows if r.event_type == event_type
    ]


def test_rows_are_cumulative_contiguous_and_cut_to_the_range():
    start = 600_000  # 00:10, so the period's last window ends at 5h
    rows = window_rows_between(_deltas(start), 4 * H, H, TYPES, after_ms=H, until_ms=4 * H)
    assert _values(rows, "click") == [(2, 2, 3, 2, 5), (3, 3, 3, 2, 5), (4, 3, 4, 2, 10)]
    assert _values(rows, "save") == [(2, 2, 0, 0, 0), (3, 3, 0, 0, 0), (4, 3, 0, 0, 0)]
    assert all(r.is_control for r in rows)


def test_rows_stop_at_the_period_end_and_ignore_deltas_after_until():
    start = 600_000
    late = Delta("x", "g", start, True, "click", 9 * H,
                 counts=counts_of(volume=50, propensity=9, volume_sum_squares=99))
    rows = window_rows_between([*_deltas(start), late], 4 * H, H, TYPES, 0, 8 * H)
    assert [r.window_end // H for r in rows if r.event_type == "click"] == [1, 2, 3, 4, 5]
    assert _values(rows, "click")[-1] == (5, 3, 4, 2, 10)


def test_an_empty_range_is_refused():
    with pytest.raises(ValueError, match="empty range"):
        window_rows_between([], 4 * H, H, TYPES, 2 * H, H)
