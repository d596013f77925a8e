"""An independent check: our p-values, intervals, corrections, power and relative lift equal
statsmodels' on the same counts (statsmodels is a test dependency, requirements.lock).

Where the formulas are the same the tolerance is 1e-9 relative. Our minimum detectable
effect and sample size neglect the far tail of the two-sided test, as the textbook closed
forms do: statsmodels' power of a one-sided test at alpha/2 is that same equation.
"""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats._delta_method import NonlinearDeltaCov
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import NormalIndPower
from statsmodels.stats.proportion import confint_proportions_2indep, proportions_ztest
from statsmodels.stats.weightstats import CompareMeans, DescrStatsW

from spark_jobs.results.power import minimum_detectable_effect, power, sample_size
from spark_jobs.results.relative import relative_lift
from spark_jobs.results.stats import (
    GroupCounts,
    benjamini_hochberg,
    correct,
    holm,
    proportion_test,
    welch_test,
)

TIGHT = 1e-9
# (control users, with the event, treatment users, with the event)
PROPORTIONS = [(1000, 200, 1000, 240), (5000, 51, 4800, 70), (250, 125, 260, 120),
               (40_000, 8_000, 40_500, 8_050)]


def counts_of(actions: np.ndarray) -> GroupCounts:
    return GroupCounts(len(actions), int((actions > 0).sum()), int(actions.sum()),
                       int((actions**2).sum()))


@pytest.mark.parametrize(("n1", "x1", "n2", "x2"), PROPORTIONS)
@pytest.mark.parametrize("alpha", [0.05, 0.001])
def test_two_proportion_z_test_and_wald_interval(n1, x1, n2, x2, alpha):
    ours = proportion_test(GroupCounts(n1, x1, x1, x1), GroupCounts(n2, x2, x2, x2), alpha)
    _, p_value = proportions_ztest([x2, x1], [n2, n1])  # pooled variance, two-sided
    low, high = confint_proportions_2indep(x2, n2, x1, n1, method="wald", compare="diff",
                                           alpha=alpha)
    assert ours.p_value == pytest.approx(p_value, rel=TIGHT)
    assert (ours.ci_low, ours.ci_high) == (pytest.approx(low, rel=TIGHT),
                                           pytest.approx(high, rel=TIGHT))


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("alpha", [0.05, 0.01])
def test_welch_t_test_from_sums_of_squares(seed, alpha):
    rng = np.random.default_rng(seed)
    control, treatment = rng.poisson(1.5, 700), rng.poisson(1.7, 400) * rng.integers(0, 2, 400)
    ours = welch_test(counts_of(control), counts_of(treatment), alpha)
    theirs = CompareMeans(DescrStatsW(treatment.astype(float)), DescrStatsW(control.astype(float)))
    _, p_value, _ = theirs.ttest_ind(usevar="unequal")
    low, high = theirs.tconfint_diff(alpha=alpha, usevar="unequal")
    assert ours.p_value == pytest.approx(p_value, rel=TIGHT)
    assert (ours.ci_low, ours.ci_high) == (pytest.approx(low, rel=TIGHT),
                                           pytest.approx(high, rel=TIGHT))


@pytest.mark.parametrize("seed", [4, 5])
def test_holm_bh_and_bonferroni_adjusted_p_values(seed):
    rng = np.random.default_rng(seed)
    p_values = list(np.concatenate([rng.uniform(0, 0.01, 5), rng.uniform(0, 1, 15)]))
    p_values[3] = p_values[7]  # a tie
    for ours, method in ((holm(p_values), "holm"), (benjamini_hochberg(p_values), "fdr_bh"),
                         (correct(p_values, "bonferroni"), "bonferroni")):
        theirs = multipletests(p_values, method=method)[1]
        assert ours == pytest.approx(list(theirs), rel=TIGHT), method


@pytest.mark.parametrize(("effect", "sd", "n1", "n2", "alpha"),
                         [(0.01, 0.4, 5000, 5000, 0.05), (0.05, 1.3, 800, 1600, 0.0125),
                          (-0.002, 0.1, 20_000, 15_000, 0.01)])
def test_power_of_the_two_sided_z_test(effect, sd, n1, n2, alpha):
    theirs = NormalIndPower().power(effect_size=effect / sd, nobs1=n1, alpha=alpha,
                                    ratio=n2 / n1, alternative="two-sided")
    assert power(effect, sd, n1, n2, alpha) == pytest.approx(theirs, rel=TIGHT)


@pytest.mark.parametrize(("sd", "n1", "ratio", "alpha", "target"),
                         [(0.4, 5000, 1.0, 0.05, 0.8), (1.3, 800, 2.0, 0.0125, 0.9),
                          (0.1, 20_000, 0.75, 0.01, 0.5)])
def test_minimum_detectable_effect_and_sample_size(sd, n1, ratio, alpha, target):
    """statsmodels' one-tailed power at alpha/2 is exactly the target at our MDE and sample
    size; its numerical solver lands within its own precision (about 1e-5) of them."""
    one_tail = NormalIndPower()
    mde = minimum_detectable_effect(sd, n1, n1 * ratio, alpha, target)
    assert one_tail.power(effect_size=mde / sd, nobs1=n1, alpha=alpha / 2, ratio=ratio,
                          alternative="larger") == pytest.approx(target, rel=TIGHT)
    needed = sample_size(mde / 2, sd, alpha, target, ratio)
    assert needed == pytest.approx(4 * n1, rel=1e-12)
    assert one_tail.power(effect_size=mde / sd / 2, nobs1=needed, alpha=alpha / 2, ratio=ratio,
                          alternative="larger") == pytest.approx(target, rel=TIGHT)
    solved = one_tail.solve_power(nobs1=n1, alpha=alpha / 2, power=target, ratio=ratio,
                                  alternative="larger")
    assert mde == pytest.approx(solved * sd, rel=1e-4)
    # the far tail the closed form neglects is tiny: the two-sided power at the MDE
    two_sided = NormalIndPower().power(effect_size=mde / sd, nobs1=n1, alpha=alpha,
                                       ratio=ratio)
    assert two_sided == pytest.approx(target, abs=1e-4) and two_sided >= target


@pytest.mark.parametrize(("n1", "x1", "n2", "x2"), PROPORTIONS)
@pytest.mark.parametrize("metric", ["propensity", "volume"])
def test_delta_method_relative_lift_against_statsmodels_generic_delta_method(n1, x1, n2, x2,
                                                                            metric):
    """statsmodels' generic delta method (a private module, but the one its models use)
    differentiates m2/m1 - 1 itself (complex step) and forms J Sigma J'."""
    control = GroupCounts(n1, x1, 2 * x1 + n1 // 10, 5 * x1 + n1 // 3)
    treatment = GroupCounts(n2, x2, 2 * x2 + n2 // 9, 5 * x2 + n2 // 3)
    ours = relative_lift(control, treatment, metric)
    assert ours is not None
    if metric == "propensity":
        means = [x1 / n1, x2 / n2]
        variances = [means[0] * (1 - means[0]) / n1, means[1] * (1 - means[1]) / n2]
    else:  # from the raw sums, not through GroupCounts' properties
        means = [control.volume / n1, treatment.volume / n2]
        variances = [(c.volume_sum_squares - c.volume**2 / c.triggered_users)
                     / (c.triggered_users - 1) / c.triggered_users for c in (control, treatment)]
    theirs = NonlinearDeltaCov(lambda p: np.atleast_1d(p[1] / p[0] - 1), np.array(means),
                               np.diag(variances))
    assert ours.lift == pytest.approx(float(theirs.predicted()[0]), rel=TIGHT)
    assert ours.std_error == pytest.approx(float(theirs.se_vectorized()[0]), rel=TIGHT)
    low, high = theirs.conf_int(alpha=0.05)[0]
    assert ours.fixed_interval(0.05) == (pytest.approx(low, rel=TIGHT),
                                         pytest.approx(high, rel=TIGHT))
    _, p_value = theirs.wald_test(np.zeros(1))
    assert ours.p_value == pytest.approx(float(p_value), rel=TIGHT)
