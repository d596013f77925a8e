"""Cumulative window rows (CONTRACTS.md sections 4 and 5), and the whole per-user + per-group
pipeline checked against a brute-force recomputation written straight from the contract.
"""

from __future__ import annotations

import random
from collections import defaultdict

import pytest

from spark_jobs.experiments.core.group_windows import ConsistencyError, GroupWindows, MetricRow
from spark_jobs.experiments.core.metrics import counts_of
from spark_jobs.experiments.core.tumbling_windows import (
    last_closed_window,
    period_last_window,
    window_end,
)
from spark_jobs.experiments.core.user_metrics import Delta, MetricParams, Outcome, UserMetricsState

WINDOW, PERIOD = 10, 60
TYPES = ("click", "save", "search")


def new_gw() -> GroupWindows:
    return GroupWindows(PERIOD, WINDOW, TYPES)


def trig(w, n=1, start=0, exp="x", group="t", control=False) -> Delta:
    return Delta(exp, group, start, control, None, w, triggered=n)


def ev(kind, w, vol=1, prop=1, ss=1, start=0, exp="x", group="t", control=False) -> Delta:
    counts = counts_of(volume=vol, propensity=prop, volume_sum_squares=ss)
    return Delta(exp, group, start, control, kind, w, counts=counts)


def values(rows: list[MetricRow], kind: str = "click") -> dict[int, tuple[int, int, int, int]]:
    """window_end -> (triggered, volume, propensity, sum_squares) of one event type."""
    return {
        r.window_end: (r.triggered_users, r.volume, r.propensity, r.volume_sum_squares)
        for r in rows
        if r.event_type == kind
    }


# -- unit cases -------------------------------------------------------------------------
def test_every_event_type_gets_a_row_zeros_included():
    """Dashboards need a row per configured event type from the first trigger on."""
    rows = new_gw().apply([trig(20)], watermark_ms=20)
    assert [(r.event_type, r.window_end) for r in rows] == [(k, 20) for k in TYPES]
    assert all(r.triggered_users == 1 and r.volume == r.propensity == 0 for r in rows)
    assert all(r.volume_sum_squares == 0 and not r.is_control for r in rows)


def test_rows_are_contiguous_and_cumulative():
    """Windows without deltas repeat the running totals: counts are cumulative, not per window."""
    gw = new_gw()
    rows = gw.apply([trig(20), ev("click", 20, vol=2, ss=4)], watermark_ms=29)
    assert values(rows) == {20: (1, 2, 1, 4)}
    rows = gw.apply([trig(40), ev("click", 40, vol=1, prop=0, ss=5)], watermark_ms=45)
    assert values(rows) == {30: (1, 2, 1, 4), 40: (2, 3, 1, 9)}
    assert values(rows, "save") == {30: (1, 0, 0, 0), 40: (2, 0, 0, 0)}


def test_only_closed_windows_are_emitted():
    """A window is written once the watermark reaches its end, not before."""
    gw = new_gw()
    assert gw.apply([trig(20)], watermark_ms=19) == []
    assert {r.window_end for r in gw.apply([], watermark_ms=20)} == {20}
    assert gw.apply([], watermark_ms=29) == []
    assert {r.window_end for r in gw.apply([], watermark_ms=30)} == {30}


def test_first_row_is_the_earliest_window_of_a_new_group():
    """In one batch, a new group starts at its smallest delta window whatever the order."""
    rows = new_gw().apply([ev("click", 40), trig(40), trig(20)], watermark_ms=40)
    assert values(rows) == {20: (1, 0, 0, 0), 30: (1, 0, 0, 0), 40: (2, 1, 1, 1)}


def test_group_stops_at_the_period_last_window_and_is_dropped():
    """No rows after the window holding the period end; the finished group leaves the state."""
    gw = GroupWindows(PERIOD, WINDOW, TYPES)
    rows = gw.apply([trig(10, start=5), ev("save", 70, start=5)], watermark_ms=500)
    assert sorted({r.window_end for r in rows}) == [10, 20, 30, 40, 50, 60, 70]
    assert values(rows, "save")[70] == (1, 1, 1, 1)
    assert gw.groups == {}
    assert gw.apply([], watermark_ms=1_000) == []


def test_groups_are_independent_and_ordered():
    """Rows of different groups and periods never mix totals; output is sorted by group."""
    gw = new_gw()
    rows = gw.apply(
        [
            trig(10, group="b"),
            trig(10, group="a", control=True),
            ev("click", 10, group="a", control=True),
            trig(80, start=70, group="a"),
        ],
        watermark_ms=80,
    )
    keys = [(r.experiment_group, r.period_start) for r in rows]
    assert keys == sorted(keys)
    a = [r for r in rows if r.experiment_group == "a" and r.period_start == 0]
    b = [r for r in rows if r.experiment_group == "b"]
    assert all(r.is_control for r in a) and not any(r.is_control for r in b)
    assert values(a)[60] == (1, 1, 1, 1)
    assert values(b)[60] == (1, 0, 0, 0)
    assert values([r for r in rows if r.period_start == 70]) == {80: (1, 0, 0, 0)}


def test_delta_for_a_written_window_is_a_consistency_error():
    """A late delta would silently change a final value; it must stop the job loudly."""
    gw = new_gw()
    gw.apply([trig(20)], watermark_ms=40)
    with pytest.raises(ConsistencyError, match="window 30"):
        gw.apply([ev("click", 30)], watermark_ms=50)
    gw = new_gw()
    gw.apply([trig(20)], watermark_ms=40)
    with pytest.raises(ConsistencyError):
        gw.apply([ev("click", 40)], watermark_ms=50)
    gw.apply([ev("click", 50)], watermark_ms=50)  # the next window is fine


def test_resume_continues_like_an_uninterrupted_accumulator():
    """After a restart, totals rebuilt from written rows give the same later rows."""
    batches = [
        ([trig(20, n=2), ev("click", 20, vol=3, prop=2, ss=5)], 25),
        ([ev("save", 30)], 30),
        ([trig(40), ev("click", 40, vol=1, prop=1, ss=1)], 44),
        ([], 45),
        ([ev("click", 60, vol=2, prop=0, ss=6)], 200),
    ]
    plain, written = new_gw(), []
    expected = [plain.apply(d, wm) for d, wm in batches]
    for i, (deltas, wm) in enumerate(batches):
        gw = GroupWindows.resume(PERIOD, WINDOW, TYPES, [r for rows in written for r in rows])
        rows = gw.apply(deltas, wm)
        assert rows == expected[i]
        written.append(rows)
    assert values(expected[-1])[60] == (3, 6, 3, 12)


def test_resume_skips_finished_groups_and_keeps_open_ones():
    """A group whose period's last window is written is not resurrected by resume."""
    gw = new_gw()
    rows = gw.apply([trig(10), trig(30, start=25, group="u", control=True)], watermark_ms=60)
    resumed = GroupWindows.resume(PERIOD, WINDOW, TYPES, rows)
    assert {r.window_end for r in rows if r.period_start == 0} == {10, 20, 30, 40, 50, 60}
    assert set(resumed.groups) == {("x", "u", 25)}  # period 0 ended with window 60
    assert resumed.groups[("x", "u", 25)].next_window == 70
    assert resumed.groups[("x", "u", 25)].is_control
    rows += resumed.apply([], watermark_ms=100)
    assert GroupWindows.resume(PERIOD, WINDOW, TYPES, rows).groups == {}


def test_resume_from_nothing_is_empty():
    """A first start (no rows yet) begins with no groups."""
    assert GroupWindows.resume(PERIOD, WINDOW, TYPES, []).groups == {}


# -- the pipeline against the contract --------------------------------------------------
# (experiment, group) -> periods as (start, is_control). Unaligned starts, a back-to-back
# re-ramp (exp_c) and a re-ramp after a gap (exp_a).
GROUPS = {
    ("exp_a", "control"): [(3, True), (130, True)],
    ("exp_a", "treatment"): [(3, False), (130, False)],
    ("exp_b", "t1"): [(40, False)],
    ("exp_c", "g"): [(0, False), (60, False)],
}
HORIZON = 240
DRAIN = 10**6


def period_of(group: tuple[str, str], ts: int) -> tuple[int, bool] | None:
    for start, control in GROUPS[group]:
        if start <= ts < start + PERIOD:
            return start, control
    return None


def generate(rng: random.Random, n_users: int) -> list[tuple]:
    """Activations (some outside any period, re-ramps, several per user) and events (some at
    exactly an activation ts, some duplicated)."""
    records: list[tuple] = []
    for user in range(n_users):
        act_ts: list[int] = []
        for group, periods in GROUPS.items():
            if rng.random() < 0.4:
                continue
            for _ in range(rng.randint(1, 3)):
                ts = rng.randrange(HORIZON)
                act_ts.append(ts)
                found = period_of(group, ts)
                if found is None:  # the snapshot's latest period: the state must refuse it
                    found = max((p for p in periods if p[0] <= ts), default=periods[0])
                records.append(("act", user, *group, found[0], found[1], ts))
        for _ in range(rng.randint(0, 25)):
            if act_ts and rng.random() < 0.25:
                ts = max(0, rng.choice(act_ts) + rng.choice((0, 0, -1, 1)))
            else:
                ts = rng.randrange(HORIZON)
            kind = rng.choice(TYPES)
            records.append(("evt", user, kind, ts))
            while rng.random() < 0.15:
                records.append(("evt", user, kind, ts))
    return records


def triggers_and_clean_events(accepted: list[tuple]) -> tuple[dict, dict, dict]:
    """First triggers per group period and user, each period's is_control, and each user's
    clean (de-duplicated) events, from the accepted records."""
    first: dict[tuple, dict[int, int]] = defaultdict(dict)
    control: dict[tuple, bool] = {}
    for rec in accepted:
        if rec[0] != "act":
            continue
        _, user, exp, group, _, _, ts = rec
        found = period_of((exp, group), ts)
        if found is None:
            continue
        key = (exp, group, found[0])
        control[key] = found[1]
        first[key][user] = min(first[key].get(user, ts), ts)
    clean: dict[int, set[tuple[str, int]]] = defaultdict(set)
    for rec in accepted:
        if rec[0] == "evt":
            clean[rec[1]].add((rec[2], rec[3]))
    return first, control, clean


def expected_windows(first: dict, watermark: int):
    """(group period, its first triggers, W, E) for every window W a group period must have:
    from its first trigger's window to min(last closed, the period's last window)."""
    closed = last_closed_window(watermark, WINDOW)
    for key, triggers in first.items():
        start = key[2]
        w = window_end(min(triggers.values()), WINDOW)
        last = min(closed, period_last_window(start, PERIOD, WINDOW))
        while w <= last:
            yield key, triggers, w, min(w, start + PERIOD)
            w += WINDOW


def brute_force(accepted: list[tuple], watermark: int) -> dict[tuple, tuple]:
    """Section 4 literally: first triggers per period, clean (de-duplicated) events, and for
    every window W from the first trigger's window to min(last closed, period's last window),
    E = min(W, s + period) and the four cumulative metrics."""
    first, control, clean = triggers_and_clean_events(accepted)
    rows: dict[tuple, tuple] = {}
    for key, triggers, w, end in expected_windows(first, watermark):
        triggered = sum(ft < end for ft in triggers.values())
        for kind in TYPES:
            counts = [
                sum(1 for k, ts in clean[user] if k == kind and ft <= ts < end)
                for user, ft in triggers.items()
            ]
            rows[(*key, kind, w)] = (
                control[key],
                triggered,
                sum(counts),
                sum(c > 0 for c in counts),
                sum(c * c for c in counts),
            )
    return rows


def as_table(rows: list[MetricRow]) -> dict[tuple, tuple]:
    table: dict[tuple, tuple] = {}
    for r in rows:
        key = (r.experiment_hash, r.experiment_group, r.period_start, r.event_type, r.window_end)
        assert key not in table, f"row {key} written twice"
        table[key] = (r.is_control, r.triggered_users, r.volume, r.propensity, r.volume_sum_squares)
    return table


class Stream:
    """Micro-batch driver shaped like the Spark operator: per-user state read/written per
    batch, `advance` only for users with input or a due timer, then the group accumulator."""

    def __init__(self, lateness: int, ttl: int, restart: random.Random | None,
                 pre_windows: int = 0) -> None:
        self.params = MetricParams(PERIOD, WINDOW, ttl, pre_windows)
        self.lateness = lateness
        self.restart = restart
        self.states: dict[int, UserMetricsState] = {}
        self.groups = GroupWindows(PERIOD, WINDOW, TYPES)
        self.written: list[MetricRow] = []
        self.accepted: list[tuple] = []
        self.late = 0
        self.watermark = 0
        self.max_ts: int | None = None

    def batch(self, records: list[tuple]) -> None:
        if self.max_ts is not None:
            self.watermark = max(self.watermark, self.max_ts - self.lateness)
        wm = self.watermark
        touched = set()
        for rec in records:
            user, ts = rec[1], rec[-1]
            state = self.states.setdefault(user, UserMetricsState(self.params))
            if rec[0] == "act":
                outcome = state.add_activation(rec[2], rec[3], rec[4], rec[5], ts, wm)
            else:
                outcome = state.add_event(rec[2], ts, wm)
            assert (outcome is Outcome.LATE) == (ts < wm)
            if outcome is Outcome.LATE:
                self.late += 1
            else:
                self.accepted.append(rec)
            touched.add(user)
            self.max_ts = ts if self.max_ts is None else max(self.max_ts, ts)
        self.step(touched)

    def finish(self, watermark: int | None = None) -> None:
        """Available-now end: one more batch at the final watermark (or a drain)."""
        if watermark is None:
            self.batch([])
        else:
            self.watermark = watermark
            self.step(set())

    def step(self, touched: set[int]) -> None:
        wm = self.watermark
        deltas: list[Delta] = []
        for user in list(self.states):
            state = self.states[user]
            wake = state.next_wakeup()
            if user in touched or (wake is not None and wake <= wm):
                deltas.extend(state.advance(wm))
            elif wake is not None:  # not due: advancing now must not produce anything
                probe = UserMetricsState.from_bytes(self.params, state.to_bytes())
                assert probe.advance(wm) == []
            wake = state.next_wakeup()
            assert wake is None or (wake > wm and wake % WINDOW == 0)
            if state.is_empty():
                assert wake is None
                del self.states[user]
        self.written += self.groups.apply(deltas, wm)
        if self.restart is not None and self.restart.random() < 0.3:
            self.states = {
                u: UserMetricsState.from_bytes(self.params, s.to_bytes())
                for u, s in self.states.items()
            }
            self.groups = GroupWindows.resume(PERIOD, WINDOW, TYPES, self.written)


def run(seed: int, disorder_factor: float, lateness: int, ttl: int, restarts: bool,
        pre_windows: int = 0) -> Stream:
    rng = random.Random(seed)
    records = generate(rng, n_users=rng.randint(5, 40))
    disorder = int(lateness * disorder_factor)
    keyed = sorted((r[-1] + rng.randint(0, disorder), rng.random(), r) for r in records)
    arrival = [r for _, _, r in keyed]
    stream = Stream(lateness, ttl, random.Random(seed + 1) if restarts else None, pre_windows)
    i = 0
    while i < len(arrival):
        size = rng.choice((1, 3, 10, 40, 120))
        stream.batch(arrival[i : i + size])
        i += size
    stream.finish()
    return stream


CASES = [
    (seed, lateness, ttl)
    for seed, (lateness, ttl) in enumerate(
        [(0, 0), (7, 5), (15, 0), (15, 40), (25, 5), (40, 10), (3, 100), (60, 5)] * 5
    )
]


@pytest.mark.parametrize(("seed", "lateness", "ttl"), CASES)
def test_stream_equals_contract_recomputation(seed, lateness, ttl):
    """With disorder within the lateness bound nothing is late, and every row written up to
    the final watermark equals the batch recomputation of the same raw data; draining past
    every period writes the remaining windows and leaves no state behind."""
    stream = run(seed, 1.0, lateness, ttl, restarts=False)
    assert stream.late == 0
    assert as_table(stream.written) == brute_force(stream.accepted, stream.watermark)
    stream.finish(DRAIN)
    assert as_table(stream.written) == brute_force(stream.accepted, DRAIN)
    assert stream.states == {}
    assert stream.groups.groups == {}


@pytest.mark.parametrize(("seed", "lateness", "ttl"), CASES[::2])
def test_stream_with_late_records_equals_recomputation_of_the_on_time_ones(seed, lateness, ttl):
    """Beyond the bound, late records go to dead letters, and the result still equals the
    recomputation of the records that were on time: decisions are final at W."""
    stream = run(seed, 4.0, lateness + 5, ttl, restarts=False)
    stream.finish(DRAIN)
    assert stream.late > 0
    assert as_table(stream.written) == brute_force(stream.accepted, DRAIN)
    assert stream.states == {}


@pytest.mark.parametrize(("seed", "lateness", "ttl"), CASES[1::3])
@pytest.mark.parametrize("factor", [1.0, 4.0])
def test_restarts_mid_stream_change_nothing(seed, lateness, ttl, factor):
    """Serialising every user state and resuming the accumulator from written rows between
    micro-batches gives exactly the rows of an uninterrupted run."""
    plain = run(seed, factor, lateness, ttl, restarts=False)
    restarted = run(seed, factor, lateness, ttl, restarts=True)
    plain.finish(DRAIN)
    restarted.finish(DRAIN)
    assert restarted.written == plain.written
    assert restarted.accepted == plain.accepted


def test_state_size_is_bounded_over_many_periods():
    """A long-running stream keeps state only for open periods, never for past ones."""
    rng = random.Random(99)
    params = MetricParams(PERIOD, WINDOW, 5)
    states = {u: UserMetricsState(params) for u in range(5)}
    gw = new_gw()
    peak = []
    for k in range(40):
        start = k * 100
        wm = start
        deltas = []
        for state in states.values():
            state.add_activation("x", "t", start, False, start + rng.randrange(PERIOD), wm)
            for _ in range(5):
                state.add_event(rng.choice(TYPES), start + rng.randrange(PERIOD), wm)
            deltas += state.advance(start + PERIOD + WINDOW)
        gw.apply(deltas, start + PERIOD + WINDOW)
        peak.append(
            (
                sum(len(s.memberships) for s in states.values()),
                len(gw.groups),
                sum(len(s.seen) + len(s.pending) for s in states.values()),
            )
        )
    assert all(p == (0, 0, 0) for p in peak)


# -- CUPED's sums against the contract ---------------------------------------------------

def brute_force_cuped(accepted: list[tuple], watermark: int, pre_windows: int
                      ) -> dict[tuple, tuple]:
    """Issue 17's CUPED sums literally: x = a triggered user's clean events of the type in
    the `pre_windows` whole windows before the window of their first trigger; per window W
    over the users with first_trigger < E: Σx, Σx², Σ x·c and Σ x·[c > 0]."""
    first, _, clean = triggers_and_clean_events(accepted)
    rows: dict[tuple, tuple] = {}
    for key, triggers, w, end in expected_windows(first, watermark):
        for kind in TYPES:
            sums = [0, 0, 0, 0]
            for user, ft in triggers.items():
                if ft >= end:
                    continue
                high = window_end(ft, WINDOW) - WINDOW
                low = high - pre_windows * WINDOW
                x = sum(1 for k, ts in clean[user] if k == kind and low <= ts < high)
                c = sum(1 for k, ts in clean[user] if k == kind and ft <= ts < end)
                for i, v in enumerate((x, x * x, x * c, x * (c > 0))):
                    sums[i] += v
            rows[(*key, kind, w)] = tuple(sums)
    return rows


def cuped_table(rows: list[MetricRow]) -> dict[tuple, tuple]:
    return {
        (r.experiment_hash, r.experiment_group, r.period_start, r.event_type, r.window_end):
        (r.pre_volume, r.pre_volume_sum_squares, r.pre_volume_x_volume,
         r.pre_volume_x_propensity)
        for r in rows
    }


@pytest.mark.parametrize(("seed", "lateness", "ttl"), CASES[::3])
@pytest.mark.parametrize("pre_windows", [1, 4])
def test_cuped_sums_equal_the_contract_recomputation(seed, lateness, ttl, pre_windows):
    """Pre-exposure counts from the state's history equal the literal definition, with late
    records and restarts; the history empties once nothing can look back at it."""
    stream = run(seed, 3.0, lateness + 5, ttl, restarts=True, pre_windows=pre_windows)
    stream.finish(DRAIN)
    expected = brute_force_cuped(stream.accepted, DRAIN, pre_windows)
    assert cuped_table(stream.written) == expected
    assert any(v[0] for v in expected.values())  # some user had pre-exposure activity
    assert as_table(stream.written) == brute_force(stream.accepted, DRAIN)
    assert stream.states == {}


def test_without_a_lookback_the_cuped_sums_are_zero():
    stream = run(5, 1.0, 15, 5, restarts=False)
    stream.finish(DRAIN)
    assert {v for v in cuped_table(stream.written).values()} == {(0, 0, 0, 0)}
