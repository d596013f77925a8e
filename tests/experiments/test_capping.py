"""Event-time windows and per-user hourly capping (CONTRACTS.md sections 4.1 and 5)."""

from __future__ import annotations

import random

import pytest

from spark_jobs.experiments.core.capping import HOUR_MS, HourlyCap
from spark_jobs.experiments.core.tumbling_windows import (
    hour_of,
    is_late,
    last_closed_window,
    period_last_window,
    window_end,
)

W = 900_000  # 15 minutes


# -- windows ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("ts", "end"), [(0, W), (1, W), (W - 1, W), (W, 2 * W), (5 * W + 7, 6 * W)]
)
def test_window_end_names_the_window_holding_ts(ts, end):
    """[W - window, W) holds ts: a ts exactly on a boundary opens the next window."""
    assert window_end(ts, W) == end
    assert end - W <= ts < end


@pytest.mark.parametrize(("watermark", "closed"), [(0, 0), (W - 1, 0), (W, W), (2 * W + 5, 2 * W)])
def test_last_closed_window_is_final_at_watermark_equal_to_end(watermark, closed):
    """A window is final once the watermark reaches its end (W <= watermark)."""
    assert last_closed_window(watermark, W) == closed
    assert closed % W == 0 and closed <= watermark < closed + W


def test_period_last_window_holds_the_period_end():
    """The last window is the one holding start + period - 1, aligned or not."""
    assert period_last_window(0, 4 * W, W) == 4 * W  # aligned period: ends on a window end
    assert period_last_window(7, 4 * W, W) == 5 * W  # unaligned: one more, partial window
    assert period_last_window(W - 1, 4 * W, W) == 5 * W
    assert period_last_window(W, 4 * W, W) == 5 * W


def test_hour_boundary_belongs_to_the_new_hour():
    """ts = k * 1h is the first ms of hour k, not the last of hour k - 1."""
    for k in (0, 1, 490_896):
        assert hour_of(k * HOUR_MS) == k
        assert hour_of(k * HOUR_MS + HOUR_MS - 1) == k
        if k:
            assert hour_of(k * HOUR_MS - 1) == k - 1


def test_is_late_is_strictly_behind_the_watermark():
    """ts == watermark is on time; ts == watermark - 1 is late."""
    assert not is_late(1_000, 1_000)
    assert is_late(999, 1_000)
    assert not is_late(1_001, 1_000)


# -- capping ----------------------------------------------------------------------------
def test_cap_is_exact():
    """The first `cap` events of an hour pass; the (cap + 1)-th and later are dropped."""
    cap = HourlyCap(3)
    base = 10 * HOUR_MS
    assert [cap.admit(base + i) for i in range(5)] == [True, True, True, False, False]
    assert cap.counts == {10: 3}


def test_duplicates_count_towards_the_cap():
    """Capping runs before de-duplication: identical events use up the quota too."""
    cap = HourlyCap(2)
    assert [cap.admit(5) for _ in range(3)] == [True, True, False]


def test_next_hour_starts_fresh():
    """A spammer capped in hour k gets a full quota again in hour k + 1."""
    cap = HourlyCap(2)
    k = 7
    assert [cap.admit(k * HOUR_MS + 1) for _ in range(3)] == [True, True, False]
    assert [cap.admit((k + 1) * HOUR_MS) for _ in range(3)] == [True, True, False]
    assert cap.counts == {k: 2, k + 1: 2}


def test_hour_boundary_event_counts_in_the_new_hour():
    """The boundary event must not be capped by the previous, full hour."""
    cap = HourlyCap(1)
    assert cap.admit(HOUR_MS - 1)
    assert not cap.admit(HOUR_MS - 1)
    assert cap.admit(HOUR_MS)
    assert not cap.admit(2 * HOUR_MS - 1)


def test_late_arrivals_of_an_open_hour_still_use_its_counter():
    """Out-of-order events of an hour that is still open share the same quota."""
    cap = HourlyCap(2)
    assert cap.admit(3 * HOUR_MS + 500)
    assert cap.admit(4 * HOUR_MS)
    assert cap.admit(3 * HOUR_MS + 1)
    assert not cap.admit(3 * HOUR_MS + 2)


def test_expire_at_the_hour_end():
    """An hour is forgotten when the watermark reaches its end (every record of it is late)."""
    cap = HourlyCap(5)
    cap.admit(2 * HOUR_MS)
    cap.admit(3 * HOUR_MS)
    cap.expire(3 * HOUR_MS - 1)
    assert set(cap.counts) == {2, 3}
    cap.expire(3 * HOUR_MS)
    assert set(cap.counts) == {3}
    cap.expire(4 * HOUR_MS)
    assert cap.is_empty()


def test_next_wakeup_is_the_oldest_hour_end():
    """The timer for the cap state fires at the end of its oldest hour, None when empty."""
    cap = HourlyCap(5)
    assert cap.next_wakeup() is None
    cap.admit(4 * HOUR_MS + 10)
    cap.admit(2 * HOUR_MS + 10)
    assert cap.next_wakeup() == 3 * HOUR_MS
    cap.expire(cap.next_wakeup())
    assert cap.next_wakeup() == 5 * HOUR_MS
    cap.expire(cap.next_wakeup())
    assert cap.next_wakeup() is None
    assert cap.is_empty()


def test_bytes_round_trip_keeps_counters():
    """State written between micro-batches resumes with the same remaining quota."""
    cap = HourlyCap(3)
    for ts in (1, 2, HOUR_MS + 5):
        cap.admit(ts)
    restored = HourlyCap.from_bytes(3, cap.to_bytes())
    assert restored.counts == cap.counts
    assert restored.admit(3)
    assert not restored.admit(4)
    assert restored.admit(HOUR_MS)


def test_from_empty_bytes_is_empty():
    """No stored state (None or b'') means a fresh user."""
    assert HourlyCap.from_bytes(3, None).is_empty()
    assert HourlyCap.from_bytes(3, b"").is_empty()


def test_randomized_against_brute_force():
    """In arrival order, with expiry and restarts, admits = first `cap` per (user, hour).

    The watermark only ever expires hours whose records are all late, so expiring must
    never change a decision for an on-time record.
    """
    rng = random.Random(7)
    for _ in range(20):
        limit = rng.randint(1, 4)
        records = [(rng.randrange(3), rng.randrange(0, 6 * HOUR_MS, 600_000)) for _ in range(300)]
        records.sort(key=lambda r: r[1] + rng.randrange(0, HOUR_MS // 2))
        lateness = HOUR_MS // 2
        states: dict[int, bytes] = {}
        watermark, max_ts = 0, 0
        admitted, expected = [], []
        seen: dict[tuple[int, int], int] = {}
        for i, (user, ts) in enumerate(records):
            if i % 17 == 0:
                watermark = max(watermark, max_ts - lateness)
            max_ts = max(max_ts, ts)
            assert not is_late(ts, watermark)
            cap = HourlyCap.from_bytes(limit, states.get(user))
            admitted.append(cap.admit(ts))
            cap.expire(watermark)
            states[user] = cap.to_bytes()
            n = seen.get((user, hour_of(ts)), 0)
            expected.append(n < limit)
            seen[(user, hour_of(ts))] = n + 1
        assert admitted == expected
