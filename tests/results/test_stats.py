"""Fixed-horizon tests from aggregates equal SciPy's tests on the raw per-user data."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from spark_jobs.results.stats import (
    GroupCounts,
    proportion_test,
    sample_ratio_mismatch,
    welch_test,
)


def counts_of(actions: np.ndarray) -> GroupCounts:
    """A group's metric row from per-user action counts (0 = triggered, no event)."""
    return GroupCounts(
        triggered_users=len(actions), propensity=int((actions > 0).sum()),
        volume=int(actions.sum()), volume_sum_squares=int((actions**2).sum()),
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_welch_from_sums_of_squares_equals_scipy_on_the_raw_data(seed):
    rng = np.random.default_rng(seed)
    control = rng.poisson(2.0, 400)
    treatment = rng.poisson(2.3, 350)
    result = welch_test(counts_of(control), counts_of(treatment))
    expected = scipy_stats.ttest_ind(treatment, control, equal_var=False)
    assert result.p_value == pytest.approx(expected.pvalue, rel=1e-9)
    interval = expected.confidence_interval(0.95)
    assert (result.ci_low, result.ci_high) == pytest.approx((interval.low, interval.high))
    assert result.difference == pytest.approx(treatment.mean() - control.mean())
    assert result.lift == pytest.approx(result.difference / control.mean())


def test_proportion_test_equals_the_pooled_z_test():
    control = GroupCounts(1000, 300, 900, 2500)
    treatment = GroupCounts(1100, 370, 1000, 2800)
    result = proportion_test(control, treatment)
    p1, p2, pooled = 0.3, 370 / 1100, 670 / 2100
    z = (p2 - p1) / math.sqrt(pooled * (1 - pooled) * (1 / 1000 + 1 / 1100))
    assert result.p_value == pytest.approx(2 * scipy_stats.norm.sf(abs(z)))
    # the same p-value as a chi-square test of the 2x2 table without continuity correction
    table = [[300, 700], [370, 730]]
    chi2 = scipy_stats.chi2_contingency(table, correction=False)
    assert result.p_value == pytest.approx(chi2.pvalue)
    half = 1.959963984540054 * math.sqrt(p1 * (1 - p1) / 1000 + p2 * (1 - p2) / 1100)
    assert (result.ci_low, result.ci_high) == pytest.approx((p2 - p1 - half, p2 - p1 + half))


def test_sample_ratio_mismatch_equals_scipy_chisquare_and_flags_a_broken_split():
    observed, allocation = [5100, 4900], [50, 50]
    expected = scipy_stats.chisquare(observed, [5000, 5000])
    assert sample_ratio_mismatch(observed, allocation) == pytest.approx(expected.pvalue)
    assert sample_ratio_mismatch([5600, 4400], [50, 50]) < 1e-9  # broken
    assert sample_ratio_mismatch([2000, 8000], [20, 80]) == pytest.approx(1.0)
    assert sample_ratio_mismatch([0, 0], [50, 50]) == 1.0


def test_degenerate_inputs_are_refused_or_neutral():
    with pytest.raises(ValueError, match="triggered users"):
        proportion_test(GroupCounts(0, 0, 0, 0), GroupCounts(10, 1, 1, 1))
    with pytest.raises(ValueError, match="at least 2"):
        welch_test(GroupCounts(1, 1, 1, 1), GroupCounts(10, 1, 1, 1))
    with pytest.raises(ValueError, match="positive"):
        sample_ratio_mismatch([10, 10], [50, 0])
    same = GroupCounts(10, 0, 0, 0)
    assert welch_test(same, same).p_value == 1.0
    assert proportion_test(same, same).p_value == 1.0
