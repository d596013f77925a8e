"""Per-user state of the metrics job: dedup, first trigger, buffered join, deltas, persistence.

Times are small ints (window 10 ms, period 100 ms) so each case reads like the contract.
"""

from __future__ import annotations

import pytest

from spark_jobs.experiments.core.user_metrics import (
    Delta,
    MetricParams,
    Outcome,
    UserMetricsState,
)

WINDOW, PERIOD, TTL = 10, 100, 5
PARAMS = MetricParams(period_ms=PERIOD, window_ms=WINDOW, dedup_ttl_ms=TTL)
ACCEPTED, DUPLICATE, LATE, OUTSIDE = (
    Outcome.ACCEPTED,
    Outcome.DUPLICATE,
    Outcome.LATE,
    Outcome.OUTSIDE_PERIOD,
)


def new() -> UserMetricsState:
    return UserMetricsState(PARAMS)


def act(state, ts, wm=0, start=0, exp="x", group="t", control=False) -> Outcome:
    return state.add_activation(exp, group, start, control, ts, wm)


def table(deltas: list[Delta]) -> dict[tuple, tuple[int, int, int, int]]:
    """Deltas keyed by (exp, group, period_start, event_type, window_end)."""
    out: dict[tuple, tuple[int, int, int, int]] = {}
    for d in deltas:
        key = (d.experiment_hash, d.experiment_group, d.period_start, d.event_type, d.window_end)
        assert key not in out, "one delta per key and advance"
        out[key] = (d.triggered, d.count("volume"), d.count("propensity"),
                    d.count("volume_sum_squares"))
    return out


def trig(w, start=0, exp="x", group="t"):
    return (exp, group, start, None, w)


def ev(kind, w, start=0, exp="x", group="t"):
    return (exp, group, start, kind, w)


# -- first trigger and the join ---------------------------------------------------------
def test_event_at_the_first_trigger_ts_counts():
    """first_trigger <= ts: an event in the same millisecond as the activation counts."""
    s = new()
    assert act(s, 13) is ACCEPTED
    assert s.add_event("click", 13, 0) is ACCEPTED
    assert table(s.advance(20)) == {trig(20): (1, 0, 0, 0), ev("click", 20): (0, 1, 1, 1)}


def test_event_before_the_first_trigger_is_not_counted():
    """Actions before the user entered the experiment are not the treatment's effect."""
    s = new()
    act(s, 13)
    s.add_event("click", 12, 0)
    assert table(s.advance(20)) == {trig(20): (1, 0, 0, 0)}


def test_trigger_counts_in_the_window_holding_it():
    """triggered_users counts first_trigger < E, so a trigger at W - 1 counts at W, one at W
    (a boundary) only at W + window."""
    s = new()
    act(s, 19, start=0, group="a")
    act(s, 20, start=0, group="b")
    out = table(s.advance(30))
    assert out == {trig(20, group="a"): (1, 0, 0, 0), trig(30, group="b"): (1, 0, 0, 0)}


def test_trigger_is_emitted_once_and_only_when_its_window_closes():
    """Window W is final only once the watermark reaches W; nothing is emitted twice."""
    s = new()
    act(s, 13)
    assert s.advance(19) == []
    assert table(s.advance(20)) == {trig(20): (1, 0, 0, 0)}
    assert s.advance(30) == []


def test_event_arriving_before_its_activation_still_counts():
    """The seed's undercounting fix: the event waits until its window closes, and an
    activation that arrives later but on time makes it count."""
    s = new()
    assert s.add_event("save", 15, 0) is ACCEPTED
    assert s.advance(12) == []  # window 20 still open: the event stays buffered
    assert act(s, 14, wm=12) is ACCEPTED
    assert table(s.advance(20)) == {trig(20): (1, 0, 0, 0), ev("save", 20): (0, 1, 1, 1)}


def test_event_whose_window_closed_without_activation_is_dropped():
    """Once its window is final, an unmatched event is forgotten (a later activation has a
    larger ts, so it could not make the event count anyway)."""
    s = new()
    s.add_event("save", 15, 0)
    assert s.advance(20) == []
    assert s.pending == []
    act(s, 21, wm=20)
    assert table(s.advance(30)) == {trig(30): (1, 0, 0, 0)}


def test_out_of_order_activation_lowers_the_first_trigger():
    """The first trigger is the smallest ts, not the first arrival (the seed's assumption)."""
    s = new()
    act(s, 27)
    act(s, 12)
    act(s, 18)
    s.add_event("click", 14, 0)  # between the true first trigger and the first arrival
    out = table(s.advance(30))
    assert out == {trig(20): (1, 0, 0, 0), ev("click", 20): (0, 1, 1, 1)}


def test_activations_outside_the_period_do_not_count():
    """An activation counts only when its ts lies in [period_start, period_start + period)."""
    s = new()
    assert act(s, 4, start=5) is OUTSIDE
    assert act(s, 105, start=5) is OUTSIDE
    assert act(s, 104, start=5) is ACCEPTED
    assert s.memberships[("x", "t", 5)].first_trigger == 104


def test_window_holding_the_period_end():
    """The last window overlaps the period end: events up to s + period - 1 count there,
    an event at s + period does not (E = min(W, s + period))."""
    s = new()
    act(s, 5, start=5)
    for ts in (103, 104, 105, 109):
        s.add_event("click", ts, 0)
    out = table(s.advance(110))
    assert out[ev("click", 110, start=5)] == (0, 2, 1, 1 + 3)
    assert len(out) == 2


def test_event_counts_in_every_group_the_user_is_in():
    """One action of a user in two experiments counts for both, with its own is_control."""
    s = new()
    act(s, 10, exp="x", group="control", control=True)
    act(s, 12, exp="y", group="t", start=2)
    s.add_event("click", 15, 0)
    deltas = s.advance(20)
    out = table(deltas)
    assert out[ev("click", 20, exp="x", group="control")] == (0, 1, 1, 1)
    assert out[ev("click", 20, exp="y", group="t", start=2)] == (0, 1, 1, 1)
    controls = {(d.experiment_hash, d.is_control) for d in deltas}
    assert controls == {("x", True), ("y", False)}


# -- deltas -----------------------------------------------------------------------------
def test_volume_propensity_and_sum_of_squares_grow_correctly():
    """Propensity flags only the user's first counted event of a type; sum of squares grows
    by 2c + 1 so that the group total is sum(count^2)."""
    s = new()
    act(s, 0)
    for ts in (1, 2, 3):
        s.add_event("click", ts, 0)
    s.add_event("save", 4, 0)
    out = table(s.advance(10))
    assert out[ev("click", 10)] == (0, 3, 1, 9)
    assert out[ev("save", 10)] == (0, 1, 1, 1)
    for ts in (11, 12):
        s.add_event("click", ts, 10)
    out = table(s.advance(20))
    assert out == {ev("click", 20): (0, 2, 0, 25 - 9)}


def test_counts_are_per_event_type():
    """Propensity of one type is independent of the user's events of another type."""
    s = new()
    act(s, 0)
    s.add_event("click", 1, 0)
    s.advance(10)
    s.add_event("save", 11, 10)
    assert table(s.advance(20)) == {ev("save", 20): (0, 1, 1, 1)}


def test_re_ramp_inside_a_period_changes_nothing():
    """A second ramp-up inside the period has the same period_start: counts go on."""
    s = new()
    act(s, 3)
    s.add_event("click", 4, 0)
    s.advance(10)
    assert act(s, 50, wm=10) is ACCEPTED  # activation after the re-ramp, same period
    s.add_event("click", 55, 10)
    assert table(s.advance(60)) == {ev("click", 60): (0, 1, 0, 3)}
    assert s.memberships[("x", "t", 0)].first_trigger == 3


def test_re_ramp_after_the_period_starts_from_zero():
    """A ramp-up after the period ended opens a new period_start; every count restarts."""
    s = new()
    act(s, 3)
    s.add_event("click", 4, 0)
    s.advance(100)
    assert s.memberships == {}
    assert act(s, 150, wm=100, start=140) is ACCEPTED
    s.add_event("click", 151, 100)
    s.add_event("click", 120, 100)  # between the periods: counts for neither
    out = table(s.advance(160))
    assert out == {trig(160, start=140): (1, 0, 0, 0), ev("click", 160, start=140): (0, 1, 1, 1)}


# -- lateness and duplicates ------------------------------------------------------------
def test_lateness_bound_is_exact():
    """ts == watermark is accepted; ts == watermark - 1 is LATE (dead letter), both inputs."""
    s = new()
    assert act(s, 50, wm=50) is ACCEPTED
    assert act(s, 49, wm=50) is LATE
    assert s.add_event("click", 50, 50) is ACCEPTED
    assert s.add_event("click", 49, 50) is LATE
    assert s.memberships[("x", "t", 0)].first_trigger == 50
    assert table(s.advance(60)) == {trig(60): (1, 0, 0, 0), ev("click", 60): (0, 1, 1, 1)}


def test_late_checked_before_period():
    """A record behind the watermark is LATE even when it is also outside the period."""
    assert act(new(), 3, wm=50, start=100) is LATE


def test_duplicate_within_ttl_is_dropped():
    """Same (event_type, ts) again is a duplicate, even after its window was counted."""
    s = new()
    act(s, 0)
    assert s.add_event("click", 12, 0) is ACCEPTED
    assert s.add_event("click", 12, 0) is DUPLICATE
    assert s.add_event("save", 12, 0) is ACCEPTED  # other type: not a duplicate
    assert s.add_event("click", 13, 0) is ACCEPTED  # other ts: not a duplicate
    assert table(s.advance(10)) == {trig(10): (1, 0, 0, 0)}
    assert s.add_event("click", 12, 10) is DUPLICATE
    out = table(s.advance(20))
    assert out[ev("click", 20)] == (0, 2, 1, 4)


def test_duplicate_after_ttl_is_late_and_key_is_forgotten():
    """The key is kept while watermark <= ts + ttl; once it passes, a copy is late anyway,
    so dropping the key never lets a duplicate count."""
    s = new()
    s.add_event("click", 12, 0)
    s.advance(12 + TTL)
    assert ("click", 12) in s.seen
    s.advance(12 + TTL + 1)
    assert ("click", 12) not in s.seen
    assert s.add_event("click", 12, 12 + TTL + 1) is LATE


def test_zero_ttl_still_deduplicates_on_time_copies():
    """With dedup_ttl 0 an on-time copy (ts >= watermark) is still a duplicate."""
    s = UserMetricsState(MetricParams(PERIOD, WINDOW, 0))
    s.add_event("click", 12, 0)
    s.advance(12)
    assert s.add_event("click", 12, 12) is DUPLICATE


# -- state lifetime ---------------------------------------------------------------------
def test_state_is_empty_after_the_period_last_window():
    """Memberships go when the period's last window closes; with seen keys expired the user
    state is empty and needs no timer, so Spark can remove it."""
    s = new()
    act(s, 5, start=5)
    s.add_event("click", 104, 0)
    s.add_event("click", 107, 0)  # after the period end 105: not counted
    s.advance(109)
    assert s.memberships
    assert table(s.advance(110)) == {ev("click", 110, start=5): (0, 1, 1, 1)}
    assert s.memberships == {}
    assert s.pending == []
    assert s.seen == {("click", 107): None}  # kept while watermark <= 107 + ttl
    assert s.next_wakeup() == 120  # window_end(107 + ttl)
    s.advance(s.next_wakeup())
    assert s.is_empty()
    assert s.next_wakeup() is None


def test_state_does_not_grow_with_past_periods():
    """A user re-ramped into many successive periods holds at most the current one."""
    s = new()
    sizes = []
    for k in range(60):
        start = k * 2 * PERIOD
        wm = start
        act(s, start + 1, wm=wm, start=start)
        for i in range(5):
            s.add_event("click", start + 1 + i, wm)
        s.advance(start + PERIOD)
        assert len(s.memberships) <= 1
        sizes.append(len(s.to_bytes()))
    s.advance(120 * PERIOD)
    assert s.is_empty()
    assert max(sizes[10:]) <= max(sizes[:10]) + 8


def test_next_wakeup_is_a_window_end_covering_pending_work():
    """The timer is always a window end, and advancing to just before it emits nothing."""
    s = new()
    assert s.next_wakeup() is None
    act(s, 33)
    assert s.next_wakeup() == 40
    s.add_event("click", 21, 0)
    assert s.next_wakeup() == 30
    assert s.advance(29) == []
    assert s.advance(30) == []  # unmatched event dropped, its key expired (21 + 5 < 30)
    assert s.seen == {}
    assert s.next_wakeup() == 40
    assert table(s.advance(40)) == {trig(40): (1, 0, 0, 0)}
    assert s.next_wakeup() == 100  # the period's last window
    assert s.advance(99) == []
    s.advance(100)
    assert s.is_empty() and s.next_wakeup() is None


def test_next_wakeup_after_advance_is_in_the_future():
    """After advance(wm) every remaining piece of work lies after wm (Spark refuses timers
    at or behind the watermark)."""
    s = new()
    act(s, 3)
    for ts in (3, 18, 27, 55):
        s.add_event("click", ts, 0)
    for wm in range(0, 130, 7):
        s.advance(wm)
        wake = s.next_wakeup()
        assert wake is None or (wake > wm and wake % WINDOW == 0)


# -- persistence ------------------------------------------------------------------------
def test_bytes_round_trip_mid_stream_gives_identical_results():
    """Restoring state between micro-batches (a restart) changes no emitted delta."""

    def feed(state_io):
        s = new()
        out = []
        steps = [
            lambda s: act(s, 17),
            lambda s: s.add_event("click", 18, 0),
            lambda s: s.add_event("click", 12, 0),
            lambda s: out.extend(s.advance(10)),
            lambda s: act(s, 11, wm=10),
            lambda s: s.add_event("click", 18, 10),
            lambda s: s.add_event("save", 25, 10),
            lambda s: out.extend(s.advance(20)),
            lambda s: s.add_event("click", 29, 20),
            lambda s: act(s, 40, wm=20, start=40, group="u"),
            lambda s: out.extend(s.advance(100)),
            lambda s: s.add_event("click", 120, 100),
            lambda s: out.extend(s.advance(140)),
        ]
        for step in steps:
            step(s)
            s = state_io(s)
        return out, s

    plain, last_plain = feed(lambda s: s)
    restored, last_restored = feed(lambda s: UserMetricsState.from_bytes(PARAMS, s.to_bytes()))
    assert plain == restored
    assert last_plain.to_bytes() == last_restored.to_bytes()
    assert table(plain)[ev("click", 20)] == (0, 2, 1, 4)


def test_from_bytes_of_nothing_is_a_fresh_state():
    """No stored state means an empty user."""
    assert UserMetricsState.from_bytes(PARAMS, None).is_empty()
    assert UserMetricsState.from_bytes(PARAMS, b"").is_empty()


def test_restored_state_is_independent_of_the_original():
    """from_bytes must not share mutable containers with the state it was written from."""
    s = new()
    act(s, 1)
    s.add_event("click", 2, 0)
    copy = UserMetricsState.from_bytes(PARAMS, s.to_bytes())
    s.advance(10)
    assert copy.pending == [(2, "click")]
    assert table(copy.advance(10)) == {trig(10): (1, 0, 0, 0), ev("click", 10): (0, 1, 1, 1)}


@pytest.mark.parametrize("control", [True, False])
def test_is_control_is_carried_to_the_deltas(control):
    """The period's control flag travels with every delta of the membership."""
    s = new()
    act(s, 1, control=control)
    s.add_event("click", 2, 0)
    assert {d.is_control for d in s.advance(10)} == {control}
