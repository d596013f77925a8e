"""The demo and the platform compress durations and slow the trigger so the embedded broker
lasts (BENCHMARKS.md, platform soak), but never override what the user configured; their
live traffic's disorder leaves room for the producer's batching within the lateness."""

from __future__ import annotations

from spark_jobs.experiments.traffic import LIVE_TRAFFIC_LINGER_MS, live_disorder_ms
from spark_jobs.local.demo import DEMO_EXPERIMENTS, DEMO_JOBS_SETTINGS, demo_settings
from spark_jobs.settings import load_settings


def test_the_demo_trigger_and_durations_apply_unless_configured():
    plain = demo_settings(load_settings(environ={}))
    assert plain.jobs.trigger_ms == 10_000 and DEMO_JOBS_SETTINGS["trigger"] == "10s"
    assert plain.experiments.lateness_ms == 20_000 and DEMO_EXPERIMENTS["lateness"] == "20s"

    configured = load_settings(environ={}, overrides={"jobs": {"trigger": "2s"},
                                                      "experiments": {"lateness": "30s"}})
    kept = demo_settings(configured)
    assert kept.jobs.trigger_ms == 2_000
    assert kept.experiments.lateness_ms == 30_000
    assert kept.experiments.window_ms == 60_000  # what was not configured is still compressed


def test_live_disorder_plus_a_linger_stays_below_the_lateness():
    for lateness in (LIVE_TRAFFIC_LINGER_MS + 1, 20_000, 60_000, 600_000):
        disorder = live_disorder_ms(lateness)
        assert 0 <= disorder <= lateness // 2
        assert disorder + LIVE_TRAFFIC_LINGER_MS < lateness
    assert live_disorder_ms(20_000) == 5_000
    assert live_disorder_ms(600_000) == 295_000
    assert live_disorder_ms(LIVE_TRAFFIC_LINGER_MS) == 0  # no room: in order


def test_only_the_accelerated_demo_allows_a_large_clock_skew():
    """`tideline demo` runs event time ahead of the clock; the platform sends in real time and
    keeps the contract's guard (CONTRACTS section 9)."""
    from spark_jobs.local.demo import accelerated_settings

    plain = load_settings(environ={})
    assert demo_settings(plain).jobs.max_clock_skew_ms == 3_600_000
    assert accelerated_settings(plain).jobs.max_clock_skew_ms == 3650 * 86_400_000
    configured = load_settings(environ={}, overrides={"jobs": {"max_clock_skew": "2h"}})
    assert accelerated_settings(configured).jobs.max_clock_skew_ms == 7_200_000
