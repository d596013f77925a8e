"""The platform's live traffic starts at the window of its first ramp-up, EVENT_TIME_LAG
behind the clock: results come without waiting for the quiet minutes before any ramp,
and every ramp-up is still in a snapshot before its activations arrive."""

from __future__ import annotations

from spark_jobs.experiments.traffic import first_ramp_up_ms
from spark_jobs.local.platform_stack import (
    EVENT_TIME_LAG,
    live_start_ms,
    platform_settings,
    traffic_spec,
)
from spark_jobs.settings import load_settings

NOW_MS = 1_790_000_123_456


def test_live_traffic_starts_at_the_first_ramp_up_one_lag_behind_the_clock(tmp_path):
    settings = platform_settings(load_settings(environ={
        "TIDELINE_AIRFLOW__HOME": str(tmp_path / "airflow"),
        "TIDELINE_VALIDATION__START_DATE": "2026-11-27"}))
    window_ms = settings.experiments.window_ms
    spec = traffic_spec(settings, users=50, now_ms=NOW_MS)
    start = live_start_ms(spec)
    lag_ms = int(EVENT_TIME_LAG.total_seconds() * 1000)
    assert start % window_ms == 0 and spec.start_ms % window_ms == 0
    assert NOW_MS - lag_ms <= start < NOW_MS - lag_ms + window_ms
    assert start <= first_ramp_up_ms(spec) < start + window_ms
    assert spec.start_ms < start  # the traffic's pre-ramp minutes are left out, not moved
    assert all(row["ramp_ts"] <= NOW_MS for row in spec.ramp_rows()
               if row["ramp_ts"] < start + window_ms)  # in the first snapshot
