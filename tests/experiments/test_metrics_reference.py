"""The pandas reference recomputation on tiny hand-built cases with numbers worked out by hand,
plus a cross-check of its vectorised steps against naive loops on generated traffic."""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict

import orjson
import pandas as pd
import pytest
from reference.metrics_reference import (
    COLUMNS,
    ReferenceSettings,
    clean_events,
    decode_messages,
    experiment_metrics,
    from_records,
    periods_of,
)

from spark_jobs.experiments.traffic import TrafficSpec, generate

M = 60_000
T0 = 1_767_225_600_000  # a whole day, so every window and hour below is aligned
CFG = ReferenceSettings(
    period_ms=60 * M, window_ms=10 * M, cap_per_user_hour=3, critical_event_types=("click", "save")
)


def ev(user: int, event_type: str, minutes: float, **extra) -> bytes:
    return orjson.dumps(
        {"user_id": user, "event_type": event_type, "ts": T0 + round(minutes * M), **extra}
    )


def act(user: int, minutes: float, exp: str = "x", group: str = "control") -> bytes:
    ts = T0 + round(minutes * M)
    return orjson.dumps(
        {"user_id": user, "experiment_hash": exp, "experiment_group": group, "ts": ts}
    )


def ramp(minutes: float, pct: float, exp="x", group="control", control=True) -> dict:
    return {
        "experiment_hash": exp,
        "experiment_group": group,
        "ramp_ts": T0 + round(minutes * M),
        "allocation_pct": pct,
        "is_control": control,
    }


def values(metrics: pd.DataFrame, event_type: str, exp="x", group="control", start=0.0) -> dict:
    """{window end in minutes after T0: (triggered, volume, propensity, sum of squares)}."""
    rows = metrics[
        (metrics["experiment_hash"] == exp)
        & (metrics["experiment_group"] == group)
        & (metrics["period_start"] == T0 + round(start * M))
        & (metrics["event_type"] == event_type)
    ]
    return {
        (w - T0) // M: (t, v, p, s)
        for w, t, v, p, s in rows[
            ["window_end", "triggered_users", "volume", "propensity", "volume_sum_squares"]
        ].itertuples(index=False)
    }


def run(events, activations, ramps, closed_minutes, cfg=CFG) -> pd.DataFrame:
    return experiment_metrics(events, activations, ramps, cfg, T0 + round(closed_minutes * M))


def test_first_trigger_boundaries_and_zero_rows():
    # u1 triggers at 5m (event at 2m is before it; event at exactly 5m counts); u2 triggers
    # at exactly 10m, so it is not yet triggered in the window ending at 10m (ft < E strictly).
    events = [ev(1, "click", 2), ev(1, "click", 5), ev(2, "click", 10), ev(1, "click", 12)]
    activations = [act(1, 5), act(2, 10), act(1, 25)]
    metrics = run(events, activations, [ramp(0, 10)], closed_minutes=30)
    assert values(metrics, "click") == {10: (1, 1, 1, 1), 20: (2, 3, 2, 5), 30: (2, 3, 2, 5)}
    # no save events at all: the windows are still there, with zeros
    assert values(metrics, "save") == {10: (1, 0, 0, 0), 20: (2, 0, 0, 0), 30: (2, 0, 0, 0)}
    assert list(metrics.columns) == COLUMNS
    assert metrics["is_control"].tolist() == [True] * 6


def cuped(metrics: pd.DataFrame, event_type: str) -> dict:
    """{window end in minutes: (Σx, Σx², Σx·volume, Σx·[volume > 0])} of group control."""
    rows = metrics[(metrics["experiment_group"] == "control")
                   & (metrics["event_type"] == event_type)]
    return {(w - T0) // M: (a, b, c, d) for w, a, b, c, d in rows[
        ["window_end", "pre_volume", "pre_volume_sum_squares", "pre_volume_x_volume",
         "pre_volume_x_propensity"]].itertuples(index=False)}


def test_cuped_sums_by_hand():
    """Lookback 15m -> 2 whole windows of 10m before the first trigger's window. u1 triggers
    at 45m (window [40, 50)): x counts [20, 40): clicks at 25, 39 -> x = 2 (the click at 19
    is before, the one at 41 inside the trigger's window). u2 triggers at 52m: [30, 50): one
    click at 30 -> x = 1. Then u1 clicks at 45 and 55, u2 at 58."""
    cfg = ReferenceSettings(period_ms=60 * M, window_ms=10 * M, cap_per_user_hour=100,
                            critical_event_types=("click",), pre_exposure_ms=15 * M)
    events = [ev(1, "click", t) for t in (19, 25, 39, 41, 45, 55)]
    events += [ev(2, "click", t) for t in (30, 58)]
    metrics = run(events, [act(1, 45), act(2, 52)], [ramp(40, 10)], 70, cfg)
    assert cuped(metrics, "click") == {
        50: (2, 4, 2 * 1, 2 * 1),                    # u1: volume 1 (the click at 45)
        60: (2 + 1, 4 + 1, 2 * 2 + 1 * 1, 2 + 1),    # u1 volume 2, u2 volume 1
        70: (3, 5, 5, 3),
    }
    assert values(metrics, "click", start=40) == {50: (1, 1, 1, 1), 60: (2, 3, 2, 5),
                                                  70: (2, 3, 2, 5)}
    no_lookback = run(events, [act(1, 45), act(2, 52)], [ramp(40, 10)], 70)
    assert set(cuped(no_lookback, "click").values()) == {(0, 0, 0, 0)}


def test_capping_at_the_hour_boundary_in_production_order():
    cfg = ReferenceSettings(2 * 60 * M, 30 * M, 3, ("click",))
    events = [
        ev(1, "click", 55),
        ev(1, "scroll", 56),  # not critical: neither counted nor capped
        ev(1, "click", 59.99998),
        ev(1, "click", 50),
        ev(1, "click", 59),  # 4th critical event of hour 0 in offset order: capped
        ev(1, "click", 60),  # a new hour starts exactly at 60m
        ev(1, "click", 60),  # a duplicate still uses a cap slot
        ev(1, "click", 61),
        ev(1, "click", 62),  # 4th of hour 1: capped
    ]
    metrics = run(events, [act(1, 0)], [ramp(0, 5)], closed_minutes=120, cfg=cfg)
    assert values(metrics, "click") == {
        30: (1, 0, 0, 0),
        60: (1, 3, 1, 9),
        90: (1, 5, 1, 25),
        120: (1, 5, 1, 25),
    }


def test_dedup_keeps_the_first_and_equal_timestamps_of_other_types_count():
    events = [
        ev(1, "click", 15, pin_id=1),
        ev(1, "save", 15),  # same user and ts, another type: not a duplicate
        ev(1, "click", 17),
        ev(1, "click", 15, pin_id=2),  # duplicate of the first (other fields do not matter)
    ]
    cfg = ReferenceSettings(60 * M, 10 * M, 100, ("click", "save"))
    frame, bad = decode_messages(events, "events")
    clean, stats = clean_events(frame, cfg)
    assert bad == 0
    assert stats["events_duplicate"] == 1
    assert list(zip(clean["event_type"], clean["ts"] - T0, strict=True)) == [
        ("click", 15 * M),
        ("save", 15 * M),
        ("click", 17 * M),
    ]
    metrics = run(events, [act(1, 1)], [ramp(0, 5)], closed_minutes=20, cfg=cfg)
    assert values(metrics, "click") == {10: (1, 0, 0, 0), 20: (1, 2, 1, 4)}
    assert values(metrics, "save") == {10: (1, 0, 0, 0), 20: (1, 1, 1, 1)}


def test_reramp_after_the_period_restarts_and_ramp_up_inside_does_not_reset():
    ramps = [
        ramp(0, 10, control=True),
        ramp(30, 15, control=False),  # inside the first period: no reset, no new is_control
        ramp(70, 20, control=False),  # after the first period [0, 60): new period [70, 130)
    ]
    events = [ev(1, "click", m) for m in (20, 40, 65, 72, 80)]
    # 65m lies between the periods: that activation counts nowhere; 72m is before the
    # user's first trigger of the second period (75m)
    activations = [act(1, 5), act(1, 65), act(1, 75)]
    metrics = run(events, activations, ramps, closed_minutes=180)
    assert values(metrics, "click") == {
        10: (1, 0, 0, 0),
        20: (1, 0, 0, 0),
        30: (1, 1, 1, 1),
        40: (1, 1, 1, 1),
        50: (1, 2, 1, 4),
        60: (1, 2, 1, 4),
    }
    assert values(metrics, "click", start=70) == {
        80: (1, 0, 0, 0),
        **{w: (1, 1, 1, 1) for w in (90, 100, 110, 120, 130)},
    }
    control = metrics.groupby("period_start")["is_control"].agg(set)
    assert control.tolist() == [{True}, {False}]


def test_window_holding_the_period_end_stops_at_the_period_end():
    cfg = ReferenceSettings(60 * M, 40 * M, 100, ("click",))
    events = [ev(1, "click", m) for m in (30, 59, 60, 70)]
    activations = [act(1, 1), act(2, 65)]  # u2 triggers after the period ended: not counted
    metrics = run(events, activations, [ramp(0, 5)], closed_minutes=80, cfg=cfg)
    assert values(metrics, "click") == {40: (1, 1, 1, 1), 80: (1, 2, 1, 4)}
    # a watermark short of 80m closes only the first window
    early = run(events, activations, [ramp(0, 5)], closed_minutes=79, cfg=cfg)
    assert values(early, "click") == {40: (1, 1, 1, 1)}


def test_volume_sum_squares_over_users_and_experiments():
    ramps = [ramp(0, 5), ramp(0, 5, exp="y", group="treatment", control=False)]
    events = [ev(1, "click", m) for m in (2, 12, 14)] + [ev(2, "click", m) for m in (3, 4)]
    activations = [act(1, 1), act(2, 1), act(1, 1, exp="y", group="treatment")]
    metrics = run(events, activations, ramps, closed_minutes=20)
    # window 10: u1 1 click, u2 2 -> 1 + 4; window 20: u1 3, u2 2 -> 9 + 4
    assert values(metrics, "click") == {10: (2, 3, 2, 5), 20: (2, 5, 2, 13)}
    assert values(metrics, "click", exp="y", group="treatment") == {
        10: (1, 1, 1, 1),
        20: (1, 3, 1, 9),
    }


def test_windows_start_at_the_groups_first_trigger_and_are_contiguous():
    events = [ev(1, "click", 44)]
    metrics = run(events, [act(1, 23), act(2, 41)], [ramp(0, 5)], closed_minutes=59)
    assert values(metrics, "click") == {30: (1, 0, 0, 0), 40: (1, 0, 0, 0), 50: (2, 1, 1, 1)}


def test_ramp_ups_first_zero_row_and_ties_in_load_order():
    period = 60 * M
    rows = [
        ramp(0, 0),  # a first row of 0 % is not a ramp-up
        ramp(10, 10),  # ramp-up: period [10, 70)
        ramp(50, 7),
        ramp(70, 5),  # at the period end, in load order: 5 (down) then 8 (up) -> new period
        ramp(70, 8, control=False),
        ramp(80, 8),  # equal: not a ramp-up
        ramp(10, 10, group="treatment", control=False),
        ramp(70, 8, group="treatment", control=False),  # tie in the other load order:
        ramp(70, 5, group="treatment", control=False),  # 8 is not above 10, 5 is a ramp-down
    ]
    periods = periods_of(rows, period)
    starts = {
        (g, (s - T0) // M, c)
        for g, s, c in periods[["experiment_group", "period_start", "is_control"]].itertuples(
            index=False
        )
    }
    assert starts == {("control", 10, True), ("control", 70, False), ("treatment", 10, False)}


def test_malformed_messages_are_counted_and_dropped():
    bad = [
        None,
        b"not json",
        b"[1, 2]",
        b'{"user_id": 1, "ts": 5}',
        b'{"user_id": 1, "event_type": "click", "ts": "5"}',
        b'{"user_id": 1.0, "event_type": "click", "ts": 5}',
        b'{"user_id": true, "event_type": "click", "ts": 5}',
        b'{"user_id": null, "event_type": "click", "ts": 5}',
    ]
    frame, count = decode_messages([*bad, ev(1, "click", 1)], "events")
    assert count == len(bad)
    assert len(frame) == 1
    pairs = [(b, "1") for b in bad]  # (value, key) pairs work too
    assert decode_messages(pairs, "experiment_activations")[1] == len(bad)


def test_no_trigger_no_rows():
    metrics = run([ev(1, "click", 5)], [act(1, 5, exp="other")], [ramp(0, 5)], 60)
    assert metrics.empty
    assert list(metrics.columns) == COLUMNS
    only_triggers = run([], [act(1, 5)], [ramp(0, 5)], 20)
    assert values(only_triggers, "click") == {10: (1, 0, 0, 0), 20: (1, 0, 0, 0)}


# ---------------------------------------------------------------- cross-check on traffic


def _naive_clean(frame: pd.DataFrame, cfg: ReferenceSettings) -> list[tuple]:
    per_hour: Counter = Counter()
    seen: set = set()
    out = []
    for user, event_type, ts in frame.itertuples(index=False):
        if event_type not in cfg.critical_event_types:
            continue
        per_hour[(user, ts // 3_600_000)] += 1
        if per_hour[(user, ts // 3_600_000)] > cfg.cap_per_user_hour:
            continue
        if (user, event_type, ts) not in seen:
            seen.add((user, event_type, ts))
            out.append((user, event_type, ts))
    return out


def _naive_first_triggers(records, periods: pd.DataFrame, cfg: ReferenceSettings) -> dict:
    starts = defaultdict(list)
    for x, g, s, _ in periods.itertuples(index=False, name=None):
        starts[(x, g)].append(s)
    out: dict = {}
    values = [r.value for r in records if r.topic == "experiment_activations"]
    frame, _ = decode_messages(values, "experiment_activations")
    for user, x, g, ts in frame.itertuples(index=False, name=None):
        for s in starts[(x, g)]:
            if s <= ts < s + cfg.period_ms:
                key = (x, g, s, user)
                out[key] = min(out.get(key, ts), ts)
    return out


def _naive_metrics(result, cfg: ReferenceSettings, closed: int) -> dict:
    """Section 4 read literally: loop over windows, users and events; and CUPED's sums with
    x = the user's events of the type in the whole windows of the lookback before the window
    of their first trigger."""
    lookback = -(-cfg.pre_exposure_ms // cfg.window_ms) * cfg.window_ms
    events_of = defaultdict(list)
    for user, event_type, ts in result.clean_events.itertuples(index=False):
        events_of[user].append((event_type, ts))
    out = {}
    triggers = result.first_triggers
    for (x, g, s), part in triggers.groupby(
        ["experiment_hash", "experiment_group", "period_start"]
    ):
        ft = dict(zip(part["user_id"], part["first_trigger"], strict=True))
        w = (min(ft.values()) // cfg.window_ms + 1) * cfg.window_ms
        while w - cfg.window_ms < s + cfg.period_ms and w <= closed:
            end = min(w, s + cfg.period_ms)
            for k in cfg.critical_event_types:
                counts = {
                    u: sum(1 for t, ts in events_of[u] if t == k and f <= ts < end)
                    for u, f in ft.items()
                }
                pre = {}
                for u, f in ft.items():
                    if f < end:
                        high = f // cfg.window_ms * cfg.window_ms
                        pre[u] = sum(1 for t, ts in events_of[u]
                                     if t == k and high - lookback <= ts < high)
                out[(x, g, s, k, w)] = (
                    sum(1 for f in ft.values() if f < end),
                    sum(counts.values()),
                    sum(1 for c in counts.values() if c),
                    sum(c * c for c in counts.values()),
                    sum(pre.values()),
                    sum(v * v for v in pre.values()),
                    sum(v * counts[u] for u, v in pre.items()),
                    sum(v for u, v in pre.items() if counts[u]),
                )
            w += cfg.window_ms
    return out


@pytest.fixture(scope="module")
def traffic():
    spec = TrafficSpec(seed=3, n_users=150, duration_ms=2 * 3_600_000, cap_per_user_hour=60)
    return spec, list(generate(spec))


def test_vectorised_steps_match_naive_loops(traffic):
    spec, records = traffic
    cfg = dataclasses.replace(ReferenceSettings.of(spec), pre_exposure_ms=25 * M)
    closed = spec.start_ms + 100 * M
    result = from_records(records, spec.ramp_rows(), cfg, closed)
    events = [r.value for r in records if r.topic == "events"]
    frame, _ = decode_messages(events, "events")
    naive_clean = _naive_clean(frame, cfg)
    assert list(result.clean_events.itertuples(index=False, name=None)) == naive_clean
    assert result.stats["events_over_cap"] > 0
    assert result.stats["events_duplicate"] > 0
    assert result.stats["activations_outside_periods"] > 0
    assert _naive_first_triggers(records, result.periods, cfg) == {
        (x, g, s, u): f
        for x, g, s, _, u, f in result.first_triggers.itertuples(index=False, name=None)
    }
    expected = _naive_metrics(result, cfg, closed)
    got = {
        tuple(row[:5]): tuple(row[6:])
        for row in result.metrics[COLUMNS].itertuples(index=False, name=None)
    }
    assert got == expected
    assert len(got) > 100
    assert any(v[4] for v in got.values())  # CUPED's x is not always 0


def test_counts_never_decrease_within_a_period(traffic):
    spec, records = traffic
    metrics = from_records(records, spec.ramp_rows(), spec, spec.start_ms + 3 * 3_600_000).metrics
    keys = ["experiment_hash", "experiment_group", "period_start", "event_type"]
    for _, part in metrics.groupby(keys):
        diffs = part[["triggered_users", "volume", "propensity", "volume_sum_squares"]].diff()
        assert (diffs.dropna() >= 0).all().all()
        steps = part["window_end"].diff().dropna()
        assert (steps == spec.window_ms).all()
    assert (metrics["propensity"] <= metrics["triggered_users"]).all()
    assert (metrics["volume_sum_squares"] >= metrics["volume"]).all()
