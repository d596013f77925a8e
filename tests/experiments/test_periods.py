"""Ramp-up and period rules of CONTRACTS.md section 3."""

from __future__ import annotations

import pytest

from spark_jobs.experiments.core.periods import (
    Period,
    PeriodIndex,
    RampRow,
    periods,
    ramp_ups,
    snapshot_periods,
)

P = 100  # period length in ms for these tests


def row(ts: int, pct: float, group: str = "g", exp: str = "x", control: bool = False) -> RampRow:
    return RampRow(exp, group, ts, pct, control)


def starts(rows: list[RampRow]) -> list[int]:
    return [p.start for p in periods(rows, P)]


def test_first_row_compares_with_zero():
    assert ramp_ups([row(10, 0.0)]) == []
    assert ramp_ups([row(10, 5.0)]) == [row(10, 5.0)]


def test_decrease_then_increase_is_a_ramp_up():
    rows = [row(10, 50), row(20, 10), row(30, 20), row(40, 20), row(50, 60)]
    assert [r.ramp_ts for r in ramp_ups(rows)] == [10, 30, 50]


def test_rows_are_ordered_by_ramp_ts_not_input():
    rows = [row(30, 20), row(10, 50), row(20, 10)]
    assert [r.ramp_ts for r in ramp_ups(rows)] == [10, 30]


def test_equal_ramp_ts_ties_keep_load_order():
    up_then_down = [row(10, 20), row(10, 5)]
    assert [r.allocation_pct for r in ramp_ups(up_then_down)] == [20]
    down_then_up = [row(10, 5), row(10, 20)]
    assert [r.allocation_pct for r in ramp_ups(down_then_up)] == [5, 20]
    # a later row with the same ts compares with the previous one in load order
    assert [r.allocation_pct for r in ramp_ups([row(10, 20), row(10, 5), row(10, 6)])] == [20, 6]


def test_groups_and_experiments_are_independent():
    rows = [row(10, 50, "a"), row(20, 10, "b"), row(30, 40, "a"), row(40, 20, "b", exp="y")]
    ups = ramp_ups(rows)
    assert [(r.experiment_hash, r.experiment_group, r.ramp_ts) for r in ups] == [
        ("x", "a", 10),
        ("x", "b", 20),
        ("y", "b", 40),
    ]


def test_period_is_start_plus_period_and_takes_the_ramp_up_row_fields():
    [p] = periods([row(1000, 0), row(1010, 30, control=True), row(1050, 10)], P)
    assert p == Period("x", "g", 1010, 1110, 30.0, True)


def test_ramp_up_inside_a_period_neither_resets_nor_extends():
    rows = [row(0, 10), row(50, 20), row(99, 30)]
    assert starts(rows) == [0]
    assert periods(rows, P)[0].end == 100
    assert periods(rows, P)[0].allocation_pct == 10


def test_ramp_up_exactly_at_period_end_starts_a_new_period():
    assert starts([row(0, 10), row(100, 20)]) == [0, 100]


def test_re_ramp_after_a_period():
    rows = [row(0, 10), row(50, 0), row(130, 10), row(180, 20), row(230, 30)]
    ps = periods(rows, P)
    assert [(p.start, p.end) for p in ps] == [(0, 100), (130, 230), (230, 330)]


def test_decrease_never_starts_a_period():
    assert starts([row(0, 50), row(200, 20)]) == [0]


def test_is_control_comes_from_the_starting_row():
    rows = [row(0, 10, control=True), row(50, 20, control=False), row(150, 30, control=False)]
    assert [p.is_control for p in periods(rows, P)] == [True, False]


def test_period_must_be_positive():
    with pytest.raises(ValueError):
        periods([row(0, 10)], 0)


def test_snapshot_lookback_boundaries():
    ps = periods([row(0, 10), row(100, 20), row(200, 30), row(300, 40)], P)
    # as_of - lookback < start <= as_of
    assert [p.start for p in snapshot_periods(ps, 200, 100)] == [200]
    assert [p.start for p in snapshot_periods(ps, 200, 101)] == [100, 200]
    assert [p.start for p in snapshot_periods(ps, 199, 100)] == [100]
    assert [p.start for p in snapshot_periods(ps, 200, None)] == [0, 100, 200]
    assert snapshot_periods(ps, 200, 0) == []
    assert snapshot_periods(ps, -1, None) == []


def test_snapshot_is_sorted_whatever_the_input_order():
    ps = periods([row(5, 10, "b"), row(3, 10, "a"), row(1, 10, "a", exp="w")], P)
    chosen = snapshot_periods(list(reversed(ps)), 10, None)
    assert [(p.experiment_hash, p.experiment_group) for p in chosen] == [
        ("w", "a"),
        ("x", "a"),
        ("x", "b"),
    ]


def test_negative_lookback_is_rejected():
    with pytest.raises(ValueError):
        snapshot_periods([], 0, -1)


def test_index_start_inclusive_end_exclusive():
    index = PeriodIndex(periods([row(100, 10), row(300, 20)], P))
    assert index.find("x", "g", 99) is None
    assert index.find("x", "g", 100).start == 100
    assert index.find("x", "g", 199).start == 100
    assert index.find("x", "g", 200) is None
    assert index.find("x", "g", 299) is None
    assert index.find("x", "g", 300).start == 300
    assert index.find("x", "g", 399).start == 300
    assert index.find("x", "g", 400) is None


def test_index_unknown_group_and_empty():
    index = PeriodIndex(periods([row(100, 10)], P))
    assert index.find("x", "other", 150) is None
    assert index.find("y", "g", 150) is None
    empty = PeriodIndex()
    assert len(empty) == 0
    assert not empty
    assert empty.find("x", "g", 0) is None


def test_index_adjacent_periods():
    index = PeriodIndex(periods([row(0, 10), row(100, 20)], P))
    assert index.find("x", "g", 99).start == 0
    assert index.find("x", "g", 100).start == 100
    assert len(index) == 2


def test_index_tolerates_overlapping_input():
    # not produced by `periods`, but e.g. a snapshot read with a longer period
    long = Period("x", "g", 0, 1000, 10, False)
    short = Period("x", "g", 100, 150, 20, False)
    index = PeriodIndex([short, long])
    assert index.find("x", "g", 120) is short
    assert index.find("x", "g", 500) is long
    assert index.find("x", "g", 1000) is None


def test_index_agrees_with_a_linear_scan():
    rows = [row(ts, (ts * 7) % 40, group=f"g{ts % 3}") for ts in range(0, 2000, 37)]
    ps = periods(rows, P)
    index = PeriodIndex(ps)
    for group in ("g0", "g1", "g2"):
        for ts in range(-10, 2200, 7):
            expected = [p for p in ps if p.experiment_group == group and p.contains(ts)]
            assert index.find("x", group, ts) == (expected[0] if expected else None)
