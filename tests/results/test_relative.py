"""Relative lift with its delta-method interval: the formula, its coverage, and the verdict's
use of it beside the absolute difference."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from spark_jobs.results.relative import delta_method, metric_moments, relative_lift
from spark_jobs.results.sequential import confidence_half_width
from spark_jobs.results.stats import GroupCounts
from spark_jobs.results.verdicts import GroupHistory, judge
from spark_jobs.settings import load_settings

PARAMS = load_settings(environ={}).stats


def test_the_delta_method_variance_by_hand():
    """rates 0.2 (n 1000) and 0.25 (n 800): Var = v2/m1^2 + m2^2 v1/m1^4."""
    lift = relative_lift(GroupCounts(1000, 200, 300, 500), GroupCounts(800, 200, 260, 420),
                         "propensity")
    assert lift is not None
    v1, v2 = 0.2 * 0.8 / 1000, 0.25 * 0.75 / 800
    assert lift.lift == pytest.approx(0.25, rel=1e-12)
    assert lift.variance == pytest.approx(v2 / 0.04 + 0.0625 * v1 / 0.0016, rel=1e-12)
    low, high = lift.fixed_interval(0.05)
    assert (low + high) / 2 == pytest.approx(0.25, rel=1e-12)
    assert high - low == pytest.approx(2 * 1.959963984540054 * math.sqrt(lift.variance),
                                       rel=1e-12)


def test_actions_per_user_use_the_sample_variance():
    control, treatment = GroupCounts(4, 3, 6, 14), GroupCounts(5, 4, 10, 30)
    assert metric_moments(control, "volume") == (1.5, (14 - 36 / 4) / 3)
    lift = relative_lift(control, treatment, "volume")
    assert lift is not None and lift.lift == pytest.approx(2 / 1.5 - 1)
    assert lift.variance == pytest.approx(
        (30 - 100 / 5) / 4 / 5 / 1.5**2 + 2**2 * (14 - 36 / 4) / 3 / 4 / 1.5**4)


def test_a_control_of_zero_has_no_relative_scale():
    assert relative_lift(GroupCounts(10, 0, 0, 0), GroupCounts(10, 2, 2, 2), "propensity") is None
    assert delta_method(0.0, 0.0, 1.0, 0.1) is None
    with pytest.raises(ValueError, match="unknown metric"):
        relative_lift(GroupCounts(10, 1, 1, 1), GroupCounts(10, 2, 2, 2), "revenue")


def test_the_sequential_interval_is_the_msprt_boundary_on_the_relative_scale():
    lift = relative_lift(GroupCounts(1000, 200, 300, 500), GroupCounts(1000, 240, 330, 560),
                         "propensity")
    assert lift is not None
    tau2 = 0.01 * 0.16  # mixing variance of the absolute difference
    low, high = lift.sequential_interval(tau2, 0.05)
    half = confidence_half_width(lift.variance, tau2 / 0.2**2, 0.05)
    assert (low, high) == (lift.lift - half, lift.lift + half)
    fixed_low, fixed_high = lift.fixed_interval(0.05)
    assert low < fixed_low and high > fixed_high  # always-valid costs width


def test_the_interval_covers_the_true_lift_as_often_as_it_says():
    """Seeded: 4000 experiments of rates 0.10 vs 0.12 with 3000 users each; the 95 % delta
    interval holds the true lift 0.2 in 95 % +- 1 % of them."""
    rng = np.random.default_rng(17)
    n, runs = 3000, 4000
    x1, x2 = rng.binomial(n, 0.10, runs), rng.binomial(n, 0.12, runs)
    covered = 0
    for a, b in zip(x1, x2, strict=True):
        lift = relative_lift(GroupCounts(n, int(a), 0, 0), GroupCounts(n, int(b), 0, 0),
                             "propensity")
        assert lift is not None
        low, high = lift.fixed_interval(0.05)
        covered += low <= 0.2 <= high
    assert abs(covered / runs - 0.95) < 0.01


def _groups(rate_control: float, rate_treatment: float) -> list[GroupHistory]:
    def series(rate: float) -> dict:
        rows = []
        for k in range(1, 13):
            n = 200 * k
            active = round(n * rate)
            rows.append((k * 3_600_000, GroupCounts(n, active, 2 * active, 5 * active)))
        return {"click": rows}
    return [GroupHistory("control", True, 0, 50.0, series(rate_control)),
            GroupHistory("treatment", False, 0, 50.0, series(rate_treatment))]


@pytest.mark.parametrize("method", ["sequential", "bonferroni"])
def test_the_verdict_shows_the_relative_interval_beside_the_difference(method):
    params = dataclasses.replace(PARAMS, method=method)
    verdict = judge("exp", _groups(0.20, 0.26), planned_looks=24, params=params)
    click = next(m for m in verdict.metrics if m.metric == "propensity")
    assert click.significant and click.lift == pytest.approx(0.3)
    assert click.difference_low is not None and click.difference_high is not None
    assert click.difference_low < click.difference[-1] < click.difference_high
    if method == "bonferroni":
        assert (click.difference_low, click.difference_high) == (click.bonferroni_low[-1],
                                                                 click.bonferroni_high[-1])
    else:
        assert (click.difference_low, click.difference_high) == (click.sequential_low[-1],
                                                                 click.sequential_high[-1])
    assert click.lift_low is not None and click.lift_high is not None
    assert 0 < click.lift_low < 0.3 < click.lift_high
    # the control's own uncertainty widens a positive lift's interval beyond difference/control
    naive = (click.difference_high - click.difference_low) / click.control
    assert click.lift_high - click.lift_low > naive
