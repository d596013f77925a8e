"""Power, minimum detectable effect and progress toward the target sample size: the closed
forms by hand and against each other, and each experiment's plan in its verdict."""

from __future__ import annotations

import math

import pytest

from spark_jobs.results.power import minimum_detectable_effect, plan, power, sample_size
from spark_jobs.results.stats import GroupCounts
from spark_jobs.results.verdicts import GroupHistory, judge
from spark_jobs.settings import load_settings

PARAMS = load_settings(environ={}).stats
Z_975, Z_80 = 1.959963984540054, 0.8416212335729143


def test_sample_size_by_hand():
    """A rate of 0.2 (sd 0.4), 5 % relative lift (0.01), alpha 0.05, power 0.8, equal groups."""
    needed = sample_size(0.01, 0.4, 0.05, 0.8)
    assert needed == pytest.approx((Z_975 + Z_80) ** 2 * 0.16 * 2 / 0.01**2, rel=1e-12)
    assert math.ceil(needed) == 25_117
    # twice as many treatment users: the control needs (1 + 1/2) / 2 of it
    assert sample_size(0.01, 0.4, 0.05, 0.8, ratio=2) == pytest.approx(needed * 0.75, rel=1e-12)


def test_power_mde_and_sample_size_agree():
    """At the sample size the power is the target (the far tail adds < 1e-5); the MDE at
    that sample size is the effect; power grows with the effect."""
    needed = sample_size(0.01, 0.4, 0.01, 0.9, ratio=1.5)
    assert power(0.01, 0.4, needed, 1.5 * needed, 0.01) == pytest.approx(0.9, abs=1e-5)
    assert minimum_detectable_effect(0.4, needed, 1.5 * needed, 0.01, 0.9) == pytest.approx(
        0.01, rel=1e-12)
    assert power(0.0, 0.4, 1000, 1000, 0.05) == pytest.approx(0.05, rel=1e-12)
    assert power(-0.02, 0.4, 1000, 1000, 0.05) == power(0.02, 0.4, 1000, 1000, 0.05)
    assert power(0.01, 0.4, 1000, 1000, 0.05) < power(0.03, 0.4, 1000, 1000, 0.05)
    with pytest.raises(ValueError, match="zero effect"):
        sample_size(0.0, 0.4, 0.05, 0.8)


def test_a_plan_from_counts():
    control, treatment = GroupCounts(5000, 1000, 0, 0), GroupCounts(10_000, 2100, 0, 0)
    p = plan(control, treatment, "propensity", 0.05, 0.8, 0.05)
    assert p is not None
    needed = sample_size(0.01, 0.4, 0.05, 0.8, ratio=2)
    assert (p.control_users, p.treatment_users) == (math.ceil(needed), math.ceil(2 * needed))
    assert p.progress == pytest.approx(5000 / needed, rel=1e-12)
    assert p.power == pytest.approx(power(0.01, 0.4, 5000, 10_000, 0.05), rel=1e-12)
    assert p.mde == pytest.approx(
        minimum_detectable_effect(0.4, 5000, 10_000, 0.05, 0.8) / 0.2, rel=1e-12)
    # actions per user: the control's sample variance (q - s^2/n)/(n - 1)
    volume = plan(GroupCounts(101, 50, 200, 1000), GroupCounts(101, 50, 220, 1100), "volume",
                  0.05, 0.8, 0.1)
    assert volume is not None
    sd = math.sqrt((1000 - 200**2 / 101) / 100)
    assert volume.control_users == math.ceil(sample_size(0.1 * 200 / 101, sd, 0.05, 0.8))


def test_no_plan_without_a_control_value_or_users():
    assert plan(GroupCounts(100, 0, 0, 0), GroupCounts(100, 5, 5, 5), "propensity",
                0.05, 0.8, 0.05) is None
    assert plan(GroupCounts(1, 1, 1, 1), GroupCounts(100, 5, 5, 5), "propensity",
                0.05, 0.8, 0.05) is None


def _history(group: str, is_control: bool, rates: dict[str, float]) -> GroupHistory:
    series = {}
    for event, rate in rates.items():
        rows = []
        for k in range(1, 7):
            n = 500 * k
            active = round(n * rate)
            rows.append((k * 3_600_000, GroupCounts(n, active, 2 * active, 5 * active)))
        series[event] = rows
    return GroupHistory(group, is_control, 0, 50.0, series)


def test_the_experiment_progress_is_that_of_its_least_powered_comparison():
    """A rare event needs the most users: it sets the experiment's progress."""
    verdict = judge("exp", [
        _history("control", True, {"click": 0.3, "save": 0.02}),
        _history("treatment", False, {"click": 0.3, "save": 0.02}),
    ], planned_looks=24, params=PARAMS)
    plans = {(m.event_type, m.metric): m.plan for m in verdict.metrics}
    assert all(p is not None for p in plans.values())
    limiting = verdict.limiting
    assert limiting is not None and limiting.plan is not None
    assert limiting.event_type == "save"
    assert limiting.plan.progress == min(p.progress for p in plans.values() if p)
    # the plan's level is the one the comparisons share: alpha / comparisons
    expected = plan(GroupCounts(3000, 60, 120, 300), GroupCounts(3000, 60, 120, 300),
                    limiting.metric, PARAMS.alpha / 4, PARAMS.power, PARAMS.target_mde)
    assert limiting.plan == expected
    assert 0 < limiting.plan.progress < 1 and limiting.plan.power < PARAMS.power
