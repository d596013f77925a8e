"""CUPED from per-group sums: equal to the per-user computation and to the regression
y ~ treatment + x (statsmodels OLS), variance reduced by about the squared correlation, and
an A/A false-positive rate at alpha; from an experiment_metrics row's columns to the
comparison the dashboard shows."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from statsmodels.regression.linear_model import OLS

from spark_jobs.results.cuped import (
    CupedSums,
    adjust,
    cuped_difference,
    cuped_of,
    theta,
)
from spark_jobs.results.cuped import sums_of as row_sums
from spark_jobs.results.stats import GroupCounts
from spark_jobs.results.verdicts import compare
from spark_jobs.settings import load_settings

TIGHT = 1e-9


def sums_of(x: np.ndarray, y: np.ndarray) -> CupedSums:
    return CupedSums(len(x), float(y.sum()), float((y * y).sum()), float(x.sum()),
                     float((x * x).sum()), float((x * y).sum()))


def users(rng: np.random.Generator, n: int, effect: float = 0.0) -> tuple[np.ndarray, ...]:
    """Pre-exposure counts x and in-experiment counts y that depend on them."""
    x = rng.poisson(3.0, n).astype(float)
    y = rng.poisson(0.5 + 0.4 * x + effect).astype(float)
    return x, y


@pytest.mark.parametrize("seed", [1, 2])
def test_the_sums_give_what_the_per_user_data_give(seed):
    rng = np.random.default_rng(seed)
    (x1, y1), (x2, y2) = users(rng, 900), users(rng, 1100, effect=0.3)
    # theta pooled within the groups, directly from the users
    centered = [(x - x.mean(), y - y.mean()) for x, y in ((x1, y1), (x2, y2))]
    slope = sum((cx * cy).sum() for cx, cy in centered) / sum((cx**2).sum() for cx, _ in centered)
    assert theta([sums_of(x1, y1), sums_of(x2, y2)]) == pytest.approx(slope, rel=TIGHT)
    x_bar = np.concatenate([x1, x2]).mean()
    control, treatment = adjust([sums_of(x1, y1), sums_of(x2, y2)])
    for got, (x, y) in ((control, (x1, y1)), (treatment, (x2, y2))):
        adjusted = y - slope * (x - x_bar)
        assert got.mean == pytest.approx(adjusted.mean(), rel=TIGHT)
        assert got.variance == pytest.approx(adjusted.var(ddof=1) / len(y), rel=TIGHT)
        assert got.raw_mean == pytest.approx(y.mean(), rel=TIGHT)
        assert got.raw_variance == pytest.approx(y.var(ddof=1) / len(y), rel=TIGHT)


def test_the_difference_is_the_regressions_treatment_coefficient():
    rng = np.random.default_rng(3)
    (x1, y1), (x2, y2) = users(rng, 700), users(rng, 650, effect=0.2)
    ours = cuped_difference(sums_of(x1, y1), sums_of(x2, y2))
    treated = np.concatenate([np.zeros(700), np.ones(650)])
    design = np.column_stack([np.ones(1350), treated, np.concatenate([x1, x2])])
    fit = OLS(np.concatenate([y1, y2]), design).fit()
    assert ours.difference == pytest.approx(fit.params[1], rel=TIGHT)
    assert ours.raw_difference == pytest.approx(y2.mean() - y1.mean(), rel=TIGHT)


def test_the_variance_shrinks_by_about_the_squared_correlation():
    rng = np.random.default_rng(4)
    (x1, y1), (x2, y2) = users(rng, 20_000), users(rng, 20_000)
    rho = np.corrcoef(np.concatenate([x1, x2]), np.concatenate([y1, y2]))[0, 1]
    ours = cuped_difference(sums_of(x1, y1), sums_of(x2, y2))
    assert 0.15 < ours.reduction == pytest.approx(rho**2, abs=0.01)


def test_an_aa_test_on_the_adjusted_difference_rejects_at_alpha():
    """Seeded: 1000 A/A experiments, |z| > 1.96 in 5 % +- 1.5 % of them."""
    rng = np.random.default_rng(5)
    rejected = 0
    for _ in range(1000):
        (x1, y1), (x2, y2) = users(rng, 300), users(rng, 300)
        est = cuped_difference(sums_of(x1, y1), sums_of(x2, y2))
        rejected += abs(est.difference) / np.sqrt(est.variance) > 1.959963984540054
    assert abs(rejected / 1000 - 0.05) < 0.015


def test_a_constant_pre_exposure_value_changes_nothing():
    rng = np.random.default_rng(6)
    y1, y2 = rng.poisson(1.0, 50).astype(float), rng.poisson(1.2, 60).astype(float)
    groups = [sums_of(np.full(50, 2.0), y1), sums_of(np.full(60, 2.0), y2)]
    assert theta(groups) == 0.0
    for got in adjust(groups):
        assert (got.mean, got.variance) == (got.raw_mean, got.raw_variance)
    assert cuped_difference(*groups).reduction == 0.0


def test_fewer_than_two_users_is_refused():
    with pytest.raises(ValueError, match="at least 2 users"):
        theta([CupedSums(1, 1, 1, 1, 1, 1), CupedSums(5, 1, 1, 1, 1, 1)])


def counts_of(x: np.ndarray, y: np.ndarray) -> GroupCounts:
    """A group's row of experiment_metrics: y = each user's volume, x their pre-exposure one."""
    return GroupCounts(len(y), int((y > 0).sum()), int(y.sum()), int((y * y).sum()),
                       (int(x.sum()), int((x * x).sum()), int((x * y).sum()),
                        int((x * (y > 0)).sum())))


@pytest.mark.parametrize("metric", ["volume", "propensity"])
def test_a_rows_sums_give_the_regression_on_that_metric(metric):
    """From the table's columns to the estimate: actions per user, or the rate (y = [c > 0]),
    adjusted by x as OLS y ~ treatment + x adjusts it."""
    rng = np.random.default_rng(7)
    (x1, c1), (x2, c2) = users(rng, 800), users(rng, 900, effect=0.25)
    ours = cuped_of(counts_of(x1, c1), counts_of(x2, c2), metric)
    y1, y2 = (c1, c2) if metric == "volume" else ((c1 > 0) * 1.0, (c2 > 0) * 1.0)
    treated = np.concatenate([np.zeros(800), np.ones(900)])
    design = np.column_stack([np.ones(1700), treated, np.concatenate([x1, x2])])
    fit = OLS(np.concatenate([y1, y2]), design).fit()
    assert ours.difference == pytest.approx(fit.params[1], rel=TIGHT)
    assert ours.raw_difference == pytest.approx(y2.mean() - y1.mean(), rel=TIGHT)
    assert ours.reduction > 0.05


def test_without_the_sums_there_is_no_cuped_estimate():
    plain = GroupCounts(100, 40, 90, 200)
    assert row_sums(plain, "volume") is None
    assert cuped_of(plain, plain, "volume") is None
    with pytest.raises(ValueError, match="unknown metric"):
        row_sums(GroupCounts(3, 1, 1, 1, (1, 1, 1, 1)), "revenue")


def test_the_verdict_shows_the_adjusted_difference_beside_the_plain_one():
    """Each comparison carries the CUPED difference with an interval that is narrower than
    the plain one by the variance removed; the verdict itself is the plain test's."""
    rng = np.random.default_rng(8)
    (x1, c1), (x2, c2) = users(rng, 3000), users(rng, 3000, effect=0.1)
    params = load_settings(environ={}, overrides={"stats": {"method": "bonferroni"}}).stats
    looks = [(1000, counts_of(x1, c1), counts_of(x2, c2))]
    result = compare("treatment", "click", "volume", looks, 2, 10, params)
    expected = cuped_of(*looks[0][1:], "volume")
    assert result.cuped_difference == pytest.approx(expected.difference, rel=TIGHT)
    assert result.cuped_reduction == pytest.approx(expected.reduction, rel=TIGHT)
    plain_half = (result.difference_high - result.difference_low) / 2
    cuped_half = (result.cuped_high - result.cuped_low) / 2
    assert cuped_half == pytest.approx(plain_half * np.sqrt(1 - expected.reduction), rel=1e-6)
    assert cuped_half < plain_half
    plain_rows = [(1000, dataclasses.replace(looks[0][1], pre=None),
                   dataclasses.replace(looks[0][2], pre=None))]
    without = compare("treatment", "click", "volume", plain_rows, 2, 10, params)
    assert without.cuped_difference is None and without.p_fixed == result.p_fixed
