"""Frame preparation of the three checks (pure pandas, tiny hand-made frames)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from spark_jobs.experiments.validation.checks import (
    DRIFT_COLUMNS,
    METRICS,
    MONOTONE_COLUMNS,
    RESET_COLUMNS,
    drift_rows,
    first_windows,
    in_groups,
    monotone_pairs,
    relative_drift,
    reset_bounds,
    worst_row,
)

H = 3_600_000
S = 10 * H  # period start


def _row(x, g, event_type, window_end, t, v, p, ss, start=S, others=0):
    """A metrics row; `others`: the value of every metric declared besides these four."""
    named = {"triggered_users": t, "volume": v, "propensity": p, "volume_sum_squares": ss}
    return {
        "experiment_hash": x, "experiment_group": g, "period_start": start,
        "event_type": event_type, "window_end": window_end, "is_control": False,
        **{metric: named.get(metric, others) for metric in METRICS},
    }


def _frame(*rows):
    return pd.DataFrame(list(rows))


def test_monotone_pairs_compare_each_window_with_the_previous_of_its_series():
    metrics = _frame(
        _row("x", "g", "click", 12 * H, 2, 5, 2, 13),
        _row("x", "g", "click", 13 * H, 3, 7, 2, 25),
        _row("x", "g", "click", 14 * H, 3, 6, 2, 26),  # volume decreased
        _row("x", "g", "save", 13 * H, 3, 1, 1, 1),  # another series: no mixing
        _row("x", "g", "save", 14 * H, 3, 1, 1, 1),
    )
    pairs = monotone_pairs(metrics, after_ms=12 * H, until_ms=14 * H)
    assert list(pairs.columns) == MONOTONE_COLUMNS
    # click: 13h and 14h against their predecessors; save: only 14h has one (13h is first)
    assert len(pairs) == 3 * len(METRICS)
    bad = pairs[pairs["value"] < pairs["previous_value"]]
    assert bad[["event_type", "window_end", "metric", "value", "previous_value"]].values.tolist() \
        == [["click", 14 * H, "volume", 6, 7]]
    assert set(pairs.loc[pairs["event_type"] == "save", "previous_window_end"]) == {13 * H}


def test_monotone_pairs_of_nothing_is_an_empty_frame_with_the_columns():
    empty = monotone_pairs(pd.DataFrame(), 0, H)
    assert empty.empty and list(empty.columns) == MONOTONE_COLUMNS


def test_first_windows_only_when_the_period_starts_on_the_day():
    rows = _frame(*(_row("x", "g", "click", w * H, 1, 1, 1, 1) for w in (11, 12, 13)))
    assert first_windows(rows, 10 * H, 24 * H)["window_end"].tolist() == [11 * H]
    assert first_windows(rows, 11 * H, 24 * H).empty  # its first window was the day before


def _raw_inputs():
    activations = pd.DataFrame(
        [
            (1, "x", "g", S + 5), (1, "x", "g", S + 9), (2, "x", "g", S + 100),
            (3, "x", "g", S - 1),  # before the period: not a trigger of it
            (4, "x", "other", S + 5),  # another group
            (5, "x", "g", 11 * H),  # at the window end: outside [S, 11h)
        ],
        columns=["user_id", "experiment_hash", "experiment_group", "ts"],
    )
    events = pd.DataFrame(
        [
            (1, "click", S + 10), (1, "click", S + 10),  # a duplicate
            (1, "click", S + 20), (2, "click", S + 200), (2, "save", S + 1),
            (3, "click", S + 10), (4, "click", S + 10), (5, "click", S + 10),
            (1, "click", 11 * H),  # at the window end
        ],
        columns=["user_id", "event_type", "ts"],
    )
    return events, activations


def test_reset_bounds_are_what_the_raw_data_of_the_new_period_allows_at_most():
    events, activations = _raw_inputs()
    first = _frame(
        _row("x", "g", "click", 11 * H, 2, 3, 2, 5),
        _row("x", "g", "save", 11 * H, 2, 0, 0, 0),
        _row("x", "g", "search", 11 * H, 2, 0, 0, 0),
    )
    bounds = reset_bounds(first, events, activations)
    assert list(bounds.columns) == RESET_COLUMNS
    got = {(r.event_type, r.metric): r.raw_bound for r in bounds.itertuples()}
    assert got[("click", "triggered_users")] == 2  # users 1 and 2
    assert got[("click", "volume")] == 3  # user 1: 2 distinct, user 2: 1
    assert got[("click", "propensity")] == 2
    assert got[("click", "volume_sum_squares")] == 2**2 + 1**2
    assert got[("save", "volume")] == 1
    assert got[("search", "volume")] == 0
    assert (bounds["value"] <= bounds["raw_bound"]).all()


def test_carried_over_counts_exceed_the_reset_bound():
    events, activations = _raw_inputs()
    carried = _frame(_row("x", "g", "click", 11 * H, 2 + 40, 3 + 900, 2 + 35, 5 + 9000,
                          others=10**6))
    bounds = reset_bounds(carried, events, activations)
    assert (bounds["value"] > bounds["raw_bound"]).all()


def test_relative_drift_is_relative_to_batch_and_one_for_a_missing_side():
    streaming = pd.Series([100, 105, 0, 1, float("nan"), 7, 95])
    batch = pd.Series([100, 100, 0, 0, 3, float("nan"), 100])
    drift = relative_drift(streaming, batch).tolist()
    assert drift[:4] == [0.0, pytest.approx(0.05), 0.0, 1.0]
    assert drift[4:6] == [1.0, 1.0]
    assert drift[6] == pytest.approx(0.05)


def test_drift_rows_join_closed_windows_and_count_missing_rows_as_drift_one():
    streaming = _frame(
        _row("x", "g", "click", 1 * H, 1, 10, 1, 100),
        _row("x", "g", "click", 2 * H, 1, 21, 1, 441),  # 5 % above batch
        _row("x", "g", "click", 3 * H, 1, 30, 1, 900),  # not closed
    )
    batch = _frame(
        _row("x", "g", "click", 1 * H, 1, 10, 1, 100),
        _row("x", "g", "click", 2 * H, 1, 20, 1, 400),
        _row("x", "g", "save", 2 * H, 1, 0, 0, 0),  # missing in streaming
        _row("x", "g", "click", 3 * H, 1, 99, 1, 900),
    )
    rows = drift_rows(streaming, batch, after_ms=0, closed_until_ms=2 * H)
    assert list(rows.columns) == DRIFT_COLUMNS
    assert len(rows) == 3 * len(METRICS)
    by = {(r.event_type, r.window_end // H, r.metric): r.drift for r in rows.itertuples()}
    assert by[("click", 1, "volume")] == 0.0
    assert by[("click", 2, "volume")] == pytest.approx(0.05)
    assert by[("click", 2, "volume_sum_squares")] == pytest.approx(41 / 400)
    assert {by[("save", 2, m)] for m in ("volume", "triggered_users")} == {1.0}
    missing = rows[rows["event_type"] == "save"]
    assert missing["streaming"].isna().all()


def test_drift_rows_of_nothing_is_empty():
    assert drift_rows(pd.DataFrame(), pd.DataFrame(), 0, H).empty


def test_worst_row_names_the_largest_severity_in_plain_values():
    frame = pd.DataFrame({"experiment_hash": ["a", "b"], "drift": [0.01, 0.2]})
    worst = worst_row(frame, frame["drift"])
    assert worst == {"experiment_hash": "b", "drift": 0.2, "severity": 0.2}
    assert type(worst["drift"]) is float
    assert worst_row(frame.iloc[0:0], frame["drift"].iloc[0:0]) is None
    nan = worst_row(pd.DataFrame({"v": [math.nan]}), pd.Series([1.0]))
    assert nan == {"v": None, "severity": 1.0}


def test_in_groups_keeps_only_the_case_groups():
    frame = _frame(_row("x", "g", "click", H, 1, 1, 1, 1), _row("x", "h", "click", H, 1, 1, 1, 1))
    assert in_groups(frame, [("x", "h")])["experiment_group"].tolist() == ["h"]
    assert in_groups(frame, []).empty
