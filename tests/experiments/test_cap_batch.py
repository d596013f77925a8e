"""Vectorized hourly capping (core/cap_batch.py) decides as HourlyCap does row by row."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_jobs.experiments.core.cap_batch import ADMITTED, CAPPED, LATE, cap_batch
from spark_jobs.experiments.core.capping import HOUR_MS, HourlyCap
from spark_jobs.experiments.core.tumbling_windows import is_late

H = HOUR_MS


def run(counters, rows, watermark):
    """cap_batch over (user, ts, partition, offset) rows."""
    columns = [np.array(c, dtype=np.int64) for c in zip(*rows, strict=True)]
    return cap_batch(counters, *columns, watermark).tolist()


def row_by_row(counters, rows, watermark):
    """The reference: each user's rows in (partition, offset) order through HourlyCap."""
    for counter in counters.values():
        counter.expire(watermark)
    outcome = [None] * len(rows)
    for i in sorted(range(len(rows)), key=lambda i: (rows[i][0], rows[i][2], rows[i][3])):
        user, ts = rows[i][0], rows[i][1]
        if is_late(ts, watermark):
            outcome[i] = LATE
        else:
            outcome[i] = ADMITTED if counters[user].admit(ts) else CAPPED
    return outcome


def test_the_first_cap_of_each_user_hour_pass_in_offset_order_not_row_order():
    counters = {1: HourlyCap(2), 2: HourlyCap(2)}
    rows = [(1, H + 5, 0, 9), (1, H + 1, 0, 3), (2, H, 0, 4), (1, H + 2, 0, 5),
            (1, 2 * H, 1, 0), (1, H + 3, 1, 1)]  # partition 1 comes after partition 0
    assert run(counters, rows, 0) == [CAPPED, ADMITTED, ADMITTED, ADMITTED, ADMITTED, CAPPED]
    assert counters[1].counts == {1: 2, 2: 1} and counters[2].counts == {1: 1}


def test_stored_counts_take_room_late_rows_take_none_and_old_hours_expire():
    counters = {7: HourlyCap(3, {0: 3, 1: 2, 2: 1})}
    rows = [(7, H - 1, 0, 0), (7, H + 7, 0, 1), (7, H + 8, 0, 2), (7, 2 * H, 0, 3)]
    assert run(counters, rows, H) == [LATE, ADMITTED, CAPPED, ADMITTED]
    assert counters[7].counts == {1: 3, 2: 2}  # hour 0 ended at the watermark: forgotten


def test_duplicates_each_take_room_and_a_full_hour_stays_full():
    counters = {5: HourlyCap(2, {3: 4})}  # more than the cap (a cap lowered since)
    rows = [(5, 4 * H, 0, 1), (5, 4 * H, 0, 1), (5, 4 * H, 0, 1), (5, 3 * H, 0, 2)]
    assert run(counters, rows, 0) == [ADMITTED, ADMITTED, CAPPED, CAPPED]
    assert counters[5].counts == {3: 4, 4: 2}


def test_no_rows_or_only_late_ones_still_expire_the_counters():
    counters = {1: HourlyCap(2, {0: 1, 5: 1})}
    assert run(counters, [(1, 0, 0, 0)], 2 * H) == [LATE]
    assert counters[1].counts == {5: 1}
    empty = np.array([], dtype=np.int64)
    assert cap_batch(counters, empty, empty, empty, empty, 6 * H).tolist() == []
    assert counters[1].is_empty()


def test_counters_of_different_caps_are_refused():
    with pytest.raises(ValueError, match="one cap per batch"):
        run({1: HourlyCap(2), 2: HourlyCap(3)}, [(1, 0, 0, 0), (2, 0, 0, 0)], 0)


users = st.sampled_from([-(2**63), -1, 0, 3, 2**63 - 1])
times = st.one_of(st.integers(0, 6 * H), st.sampled_from([H - 1, H, 2 * H, 2**62]))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(users, times, st.integers(0, 2), st.integers(0, 5)), max_size=60),
       st.dictionaries(users, st.dictionaries(st.integers(0, 7), st.integers(0, 6)), max_size=3),
       st.integers(1, 5), st.one_of(st.just(0), st.integers(0, 7 * H)))
def test_vectorized_capping_matches_hourly_cap_row_by_row(rows, stored, cap, watermark):
    """Random users, hours, partitions, offsets (duplicates too), stored counts and
    watermarks: the same outcome for every row and the same counters afterwards."""
    counters = {user: HourlyCap(cap, dict(stored.get(user, {}))) for user, *_ in rows}
    expected_counters = copy.deepcopy(counters)
    expected = row_by_row(expected_counters, rows, watermark)
    assert (run(counters, rows, watermark) if rows else []) == expected
    assert {u: c.counts for u, c in counters.items()} == {
        u: c.counts for u, c in expected_counters.items()}
    for counter in counters.values():  # stored as HourlyCap stores them: plain ints
        assert all(type(k) is int and type(v) is int for k, v in counter.counts.items())
