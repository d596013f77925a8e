"""Provisional deltas per user (core/user_metrics) and the live totals they feed
(core/provisional): every accepted record counts at once, windows still open included, and
once a period's last window is out the live totals equal the final ones.

Times are small ints (window 10 ms, period 100 ms), as in test_user_metrics.
"""

from __future__ import annotations

import pickle
from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from spark_jobs.experiments.core.metrics import counts_of
from spark_jobs.experiments.core.provisional import ProvisionalRow, ProvisionalTotals
from spark_jobs.experiments.core.user_metrics import Delta, MetricParams, UserMetricsState

WINDOW, PERIOD, TTL = 10, 100, 5
PARAMS = MetricParams(period_ms=PERIOD, window_ms=WINDOW, dedup_ttl_ms=TTL)
TYPES = ("a", "b")
DRAIN = 10**6


def live(deltas: list[Delta]) -> dict[tuple, tuple[int, int, int, int]]:
    """Provisional deltas keyed by (group, period_start, event_type)."""
    out = {}
    for d in deltas:
        assert d.window_end is None
        key = (d.experiment_group, d.period_start, d.event_type)
        assert key not in out, "one delta per membership and type"
        out[key] = (d.triggered, *d.counts)
    return out


def test_events_count_at_once_and_only_changes_are_reported():
    s = UserMetricsState(PARAMS)
    s.add_activation("x", "t", 0, False, 3, 0)
    s.add_event("a", 5, 0)
    s.add_event("a", 7, 0)
    assert live(s.provisional()) == {("t", 0, None): (1, 0, 0, 0), ("t", 0, "a"): (0, 2, 1, 4)}
    assert s.provisional() == []
    s.add_event("a", 30, 0)  # c 2 -> 3: volume +1, propensity +0, squares 9 - 4
    s.add_event("b", 1, 0)  # before the first trigger: no change
    assert live(s.provisional()) == {("t", 0, "a"): (0, 1, 0, 5)}


def test_activation_after_its_events_and_a_lower_first_trigger_cover_pending_events():
    s = UserMetricsState(PARAMS)
    s.add_event("a", 12, 0)
    s.add_event("a", 15, 0)
    s.add_event("b", 40, 0)
    assert s.provisional() == []
    s.add_activation("x", "t", 0, False, 14, 0)  # covers 15 and 40, not 12
    assert live(s.provisional()) == {("t", 0, None): (1, 0, 0, 0), ("t", 0, "a"): (0, 1, 1, 1),
                                     ("t", 0, "b"): (0, 1, 1, 1)}
    s.add_activation("x", "t", 0, False, 10, 0)  # lower: now 12 counts too, no new trigger
    assert live(s.provisional()) == {("t", 0, "a"): (0, 1, 0, 3)}
    s.add_activation("x", "t", 0, False, 11, 0)  # not lower: nothing
    assert s.provisional() == []


def test_duplicates_late_records_and_other_periods_change_nothing():
    s = UserMetricsState(PARAMS)
    s.add_activation("x", "t", 0, False, 50, 50)
    s.add_event("a", 60, 50)
    s.provisional()
    s.add_event("a", 60, 50)  # duplicate
    s.add_event("a", 49, 50)  # late
    s.add_activation("x", "t", 0, False, 45, 50)  # late
    s.add_event("a", 100, 50)  # at the period end: outside
    assert s.provisional() == []


def test_live_counts_survive_advance_and_expire_with_the_period():
    s = UserMetricsState(PARAMS)
    s.add_activation("x", "t", 0, False, 3, 0)
    s.add_event("a", 5, 0)
    s.provisional()
    s.advance(20)  # the event's window closes: counted, live unchanged
    s.add_event("a", 25, 20)
    assert live(s.provisional()) == {("t", 0, "a"): (0, 1, 0, 3)}
    s.advance(100)  # the period's last window: the membership goes, its live counts too
    assert s.memberships == {}
    s.add_activation("x", "t", 100, False, 100, 100)  # the next period starts from zero
    s.add_event("a", 101, 100)
    assert live(s.provisional()) == {("t", 100, None): (1, 0, 0, 0),
                                     ("t", 100, "a"): (0, 1, 1, 1)}


def test_state_saved_before_provisional_rows_reports_everything_once():
    """A checkpoint written by the previous release (4-field memberships) still loads, and
    its whole live count is reported once, as new (the provisional table starts empty)."""
    members = {("x", "t", 0): (False, 3, True, {"a": 2})}
    old = pickle.dumps((members, [(25, "a"), (26, "b"), (2, "b")], [("a", 25), ("b", 26)]))
    s = UserMetricsState.from_bytes(PARAMS, old)
    assert live(s.provisional()) == {("t", 0, None): (1, 0, 0, 0), ("t", 0, "a"): (0, 3, 1, 9),
                                     ("t", 0, "b"): (0, 1, 1, 1)}
    again = UserMetricsState.from_bytes(PARAMS, s.to_bytes())
    assert again.provisional() == []
    assert again.memberships[("x", "t", 0)].live == {"a": 3, "b": 1}


# -- the live totals ---------------------------------------------------------------------
def delta(event_type: str | None, n: int = 0, start: int = 0, group: str = "t") -> Delta:
    if event_type is None:
        return Delta("x", group, start, False, None, None, triggered=1)
    return Delta("x", group, start, False, event_type, None,
                 counts=counts_of(volume=n, propensity=1, volume_sum_squares=n * n))


def rows_by_key(rows: list[ProvisionalRow]) -> dict[tuple, tuple]:
    return {(r.experiment_group, r.period_start, r.event_type):
            (r.triggered_users, r.volume, r.propensity, r.volume_sum_squares) for r in rows}


def test_totals_fold_deltas_and_give_every_open_group_and_type():
    totals = ProvisionalTotals(PERIOD, WINDOW, TYPES)
    assert totals.apply([delta(None), delta("a", 2)], 0) != []
    rows = totals.apply([delta(None, group="u"), delta("a", 1)], 50)
    assert rows_by_key(rows) == {("t", 0, "a"): (1, 3, 2, 5), ("t", 0, "b"): (1, 0, 0, 0),
                                 ("u", 0, "a"): (1, 0, 0, 0), ("u", 0, "b"): (1, 0, 0, 0)}
    assert totals.apply([], 60) == []  # nothing changed: nothing to write


def test_a_closed_group_gives_its_last_rows_then_is_dropped_and_resume_continues():
    totals = ProvisionalTotals(PERIOD, WINDOW, TYPES)
    written = totals.apply([delta(None), delta("a", 2), delta(None, start=100)], 90)
    resumed = ProvisionalTotals.resume(PERIOD, WINDOW, TYPES, written)
    for one in (totals, resumed):
        rows = rows_by_key(one.apply([delta("a", 1), delta("b", 1, start=100)], 100))
        assert rows[("t", 0, "a")] == (1, 3, 2, 5)  # the period's last window is out
        assert rows[("t", 100, "b")] == (1, 1, 1, 1)
        assert set(one.groups) == {("x", "t", 100)}


def test_a_batch_the_table_holds_is_not_folded_again():
    totals = ProvisionalTotals(PERIOD, WINDOW, TYPES)
    totals.apply([delta(None), delta("a", 2)], 0)
    assert totals.apply([delta("a", 5)], 0, fold=False) == []
    assert rows_by_key(totals.apply([delta("b", 1)], 0))[("t", 0, "a")] == (1, 2, 1, 4)


# -- the property ------------------------------------------------------------------------
record = st.tuples(st.integers(0, 2), st.booleans(), st.sampled_from(("t", "u")),
                   st.sampled_from(TYPES), st.integers(-5, 60))
batches = st.lists(st.tuples(st.integers(0, 25), st.lists(record, max_size=8), st.booleans()),
                   max_size=14)


def _sum(into: dict, key: tuple, values: tuple[int, ...]) -> None:
    into[key] = tuple(a + b for a, b in zip(into.get(key, (0,) * len(values)), values,
                                            strict=True))


def _brute_live(accepted: list[tuple]) -> dict[tuple, tuple]:
    """The semantics straight: per user and accepted membership, c = accepted events of the
    type with first_trigger <= ts < period end; triggered counts memberships."""
    first: dict[tuple, int] = {}
    for user, is_act, group, _, ts in accepted:
        if is_act:
            key = (user, group, ts // PERIOD * PERIOD)
            first[key] = min(first.get(key, ts), ts)
    out: dict[tuple, tuple] = {}
    for (user, group, start), trigger in first.items():
        _sum(out, (group, start, None), (1, 0, 0, 0))
        for event_type in TYPES:
            c = sum(1 for u, is_act, _, k, ts in accepted
                    if u == user and not is_act and k == event_type
                    and trigger <= ts < start + PERIOD)
            if c:
                _sum(out, (group, start, event_type), (0, c, 1, c * c))
    return out


@settings(max_examples=150, deadline=None)
@given(batches)
def test_live_totals_are_the_semantics_and_end_as_the_final_totals(plan):
    """After every batch Σ provisional deltas = the semantics of the accepted records (and
    >= the final totals so far); after the drain Σ provisional = Σ final deltas per key."""
    users: dict[int, UserMetricsState] = defaultdict(lambda: UserMetricsState(PARAMS))
    provisional: dict[tuple, tuple] = {}
    final: dict[tuple, tuple] = {}
    accepted: list[tuple] = []
    watermark = 0

    def fold(deltas: list[Delta], into: dict) -> None:
        for d in deltas:
            assert d.triggered >= 0 and min(d.counts) >= 0
            _sum(into, (d.experiment_group, d.period_start, d.event_type),
                 (d.triggered, *d.counts))

    for step, records, restart in plan:
        watermark += step
        for user, is_act, group, event_type, offset in records:
            ts = watermark + offset
            if ts < 0:
                continue
            state = users[user]
            if is_act:
                outcome = state.add_activation("x", group, ts // PERIOD * PERIOD, False, ts,
                                               watermark)
            else:
                outcome = state.add_event(event_type, ts, watermark)
            if outcome.value == "accepted":
                accepted.append((user, is_act, group, event_type, ts))
        for user, state in list(users.items()):
            fold(state.provisional(), provisional)
            fold(state.advance(watermark), final)
            if restart:
                users[user] = UserMetricsState.from_bytes(PARAMS, state.to_bytes())
        assert provisional == _brute_live(accepted)
        assert all(all(p >= f for p, f in zip(provisional[k], v, strict=True))
                   for k, v in final.items())
    for state in users.values():
        fold(state.provisional(), provisional)
        fold(state.advance(DRAIN), final)
    assert provisional == final
