"""Experiment verdicts: win, loss (guardrail), sample ratio mismatch, not enough data."""

from __future__ import annotations

import dataclasses

import pytest

from spark_jobs.results.stats import GroupCounts, proportion_test, welch_test
from spark_jobs.results.verdicts import GroupHistory, judge
from spark_jobs.settings import load_settings

PARAMS = load_settings(environ={}).stats
WINDOW = 3_600_000


def history(group: str, is_control: bool, users_per_window: int, rates: dict[str, float],
            windows: int = 12, allocation: float = 50.0) -> GroupHistory:
    """Deterministic cumulative counts: `rate` of the users act, each twice on average."""
    series = {}
    for event, rate in rates.items():
        rows = []
        for k in range(1, windows + 1):
            n = users_per_window * k
            active = round(n * rate)
            rows.append((k * WINDOW, GroupCounts(n, active, 2 * active, 5 * active)))
        series[event] = rows
    return GroupHistory(group, is_control, 0, allocation, series)


def test_a_clear_rise_is_a_win_by_the_sequential_test():
    verdict = judge("exp", [
        history("control", True, 200, {"click": 0.20, "impression": 0.5}),
        history("treatment", False, 200, {"click": 0.26, "impression": 0.5}),
    ], planned_looks=24, params=PARAMS)
    assert (verdict.status, verdict.label, verdict.method) == ("win", "significant win",
                                                               "sequential")
    click = next(m for m in verdict.metrics if (m.event_type, m.metric) == ("click", "propensity"))
    assert click.direction == "up" and click.p_sequential < PARAMS.alpha
    assert click.lift == pytest.approx(0.3)
    assert 0 < click.lift_low < 0.3 < click.lift_high
    assert "mSPRT" in verdict.reason and not verdict.guardrail_drops
    assert verdict.comparisons == 4 and verdict.looks == 12


def test_a_guardrail_drop_is_a_loss_and_named():
    verdict = judge("exp", [
        history("control", True, 200, {"click": 0.26, "impression": 0.6}),
        history("treatment", False, 200, {"click": 0.26, "impression": 0.5}),
    ], planned_looks=24, params=PARAMS)
    assert verdict.status == "loss"
    drops = verdict.guardrail_drops
    assert {(m.event_type, m.direction) for m in drops} == {("impression", "down")}


def test_a_broken_split_is_flagged_before_any_effect():
    verdict = judge("exp", [
        history("control", True, 200, {"click": 0.20}),
        history("treatment", False, 240, {"click": 0.30}),
    ], planned_looks=24, params=PARAMS)
    assert verdict.status == "srm" and verdict.srm_p < PARAMS.srm_alpha


def test_an_uneven_allocation_that_matches_the_counts_is_no_mismatch():
    verdict = judge("exp", [
        history("control", True, 300, {"click": 0.2}, allocation=60),
        history("treatment", False, 200, {"click": 0.2}, allocation=40),
    ], planned_looks=24, params=PARAMS)
    assert verdict.status == "none" and verdict.srm_p > 0.5


def test_too_few_users_means_no_verdict_yet():
    verdict = judge("exp", [
        history("control", True, 5, {"click": 0.1}, windows=3),
        history("treatment", False, 5, {"click": 0.9}, windows=3),
    ], planned_looks=24, params=PARAMS)
    assert verdict.status == "none" and "waiting for 100 triggered users" in verdict.reason


def test_bonferroni_is_stricter_than_one_look_and_named_in_the_verdict():
    params = dataclasses.replace(PARAMS, method="bonferroni")
    groups = [history("control", True, 200, {"click": 0.20}),
              history("treatment", False, 200, {"click": 0.26})]
    verdict = judge("exp", groups, planned_looks=24, params=params)
    click = next(m for m in verdict.metrics if m.metric == "propensity")
    control, treatment = groups[0].series["click"][-1][1], groups[1].series["click"][-1][1]
    assert click.p_fixed == proportion_test(control, treatment).p_value
    volume = next(m for m in verdict.metrics if m.metric == "volume")
    assert volume.p_fixed == welch_test(control, treatment).p_value
    assert click.p_bonferroni == pytest.approx(min(1.0, click.p_fixed * 24 * 2))
    assert verdict.status == "win" and "Bonferroni" in verdict.reason
    strict = judge("exp", groups, planned_looks=10**9, params=params)
    assert strict.status == "none"


def test_bands_hold_each_group_per_window():
    verdict = judge("exp", [
        history("control", True, 200, {"click": 0.2}),
        history("treatment", False, 200, {"click": 0.2}),
    ], planned_looks=24, params=PARAMS)
    band = verdict.bands["control"]["click"]["propensity"]
    assert len(band.window_end) == 12 and band.value[-1] == pytest.approx(0.2)
    assert all(lo < v < hi for lo, v, hi in zip(band.low, band.value, band.high, strict=True))
