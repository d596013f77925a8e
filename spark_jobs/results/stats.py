"""Fixed-horizon tests on the cumulative counts of one window (issue 4, first part).

Inputs are what `experiment_metrics` holds per group: triggered users n, users with the
event (propensity) x, volume s and volume_sum_squares q. Actions per triggered user then
have mean s/n and variance (q - s^2/n)/(n - 1), so no raw data is needed. No Spark: math
and SciPy's t and chi-square distributions; tests compare with SciPy's own tests. The
corrections for many comparisons (Bonferroni, Holm, Benjamini-Hochberg) are here too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

from spark_jobs.results.settings import CORRECTIONS

_NORMAL = NormalDist()


@dataclass(frozen=True)
class GroupCounts:
    """One group's cumulative counts for one event type and window."""

    triggered_users: int
    propensity: int
    volume: int
    volume_sum_squares: int
    # CUPED's sums (Σx, Σx², Σx·volume, Σx·[volume > 0]; results/cuped.py) where the row has
    # them; not part of equality, so a final and a provisional row compare on the counts
    pre: tuple[int, int, int, int] | None = field(default=None, compare=False)

    @property
    def rate(self) -> float:
        return self.propensity / self.triggered_users if self.triggered_users else 0.0

    @property
    def mean_actions(self) -> float:
        return self.volume / self.triggered_users if self.triggered_users else 0.0

    @property
    def var_actions(self) -> float:
        """Sample variance of actions per triggered user (n - 1 in the denominator)."""
        n = self.triggered_users
        if n < 2:
            return 0.0
        return max(0.0, (self.volume_sum_squares - self.volume**2 / n) / (n - 1))


@dataclass(frozen=True)
class Comparison:
    """Treatment minus control: difference, relative lift, CI of the difference, p-value."""

    control: float
    treatment: float
    difference: float
    lift: float | None
    ci_low: float
    ci_high: float
    p_value: float


def _two_sided_p(z: float) -> float:
    return 2.0 * (1.0 - _NORMAL.cdf(abs(z)))


def _lift(control: float, difference: float) -> float | None:
    return None if control == 0 else difference / control


def proportion_test(control: GroupCounts, treatment: GroupCounts, alpha: float = 0.05
                    ) -> Comparison:
    """Two-sample z-test of propensity rates (pooled variance for the p-value, unpooled for
    the Wald interval of the difference)."""
    n1, n2 = control.triggered_users, treatment.triggered_users
    if n1 == 0 or n2 == 0:
        raise ValueError("both groups need triggered users")
    p1, p2 = control.rate, treatment.rate
    pooled = (control.propensity + treatment.propensity) / (n1 + n2)
    se_pooled = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    difference = p2 - p1
    p_value = 1.0 if se_pooled == 0 else _two_sided_p(difference / se_pooled)
    se = math.sqrt(p1 * (1 - p1) / n1 + p2 * (1 - p2) / n2)
    half = _NORMAL.inv_cdf(1 - alpha / 2) * se
    return Comparison(p1, p2, difference, _lift(p1, difference), difference - half,
                      difference + half, p_value)


def welch_test(control: GroupCounts, treatment: GroupCounts, alpha: float = 0.05
               ) -> Comparison:
    """Welch's t-test of actions per triggered user, from counts and sums of squares."""
    from scipy.stats import t as student_t

    n1, n2 = control.triggered_users, treatment.triggered_users
    if n1 < 2 or n2 < 2:
        raise ValueError("Welch's test needs at least 2 triggered users per group")
    m1, m2 = control.mean_actions, treatment.mean_actions
    a, b = control.var_actions / n1, treatment.var_actions / n2
    difference = m2 - m1
    se = math.sqrt(a + b)
    if se == 0:
        return Comparison(m1, m2, difference, _lift(m1, difference), difference, difference,
                          1.0 if difference == 0 else 0.0)
    dof = (a + b) ** 2 / (a**2 / (n1 - 1) + b**2 / (n2 - 1))
    statistic = difference / se
    p_value = float(2 * student_t.sf(abs(statistic), dof))
    half = float(student_t.ppf(1 - alpha / 2, dof)) * se
    return Comparison(m1, m2, difference, _lift(m1, difference), difference - half,
                      difference + half, p_value)


def sample_ratio_mismatch(observed: Sequence[int], allocation: Sequence[float]) -> float:
    """p-value of a chi-square goodness-of-fit test of triggered users against the groups'
    configured allocation (any scale, e.g. percentages): a tiny value flags a broken split."""
    from scipy.stats import chi2

    if len(observed) != len(allocation) or len(observed) < 2:
        raise ValueError("need one allocation per group, at least two groups")
    if any(share <= 0 for share in allocation):
        raise ValueError("allocations must be positive")
    total, weight = sum(observed), sum(allocation)
    if total == 0:
        return 1.0
    statistic = sum(
        (count - total * share / weight) ** 2 / (total * share / weight)
        for count, share in zip(observed, allocation, strict=True)
    )
    return float(chi2.sf(statistic, len(observed) - 1))


def bonferroni(p_value: float, tests: int) -> float:
    """p-value adjusted for `tests` comparisons (looks x metrics), capped at 1."""
    if tests < 1:
        raise ValueError("need at least one test")
    return min(1.0, p_value * tests)



def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values (family-wise error, any dependence). A None (a
    comparison without a test yet) counts as p = 1 in the family and stays None."""
    filled = [1.0 if p is None else p for p in p_values]
    m = len(filled)
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(sorted(range(m), key=filled.__getitem__)):
        running = max(running, min(1.0, (m - rank) * filled[index]))
        adjusted[index] = running
    return [None if p is None else a for p, a in zip(p_values, adjusted, strict=True)]


def benjamini_hochberg(p_values: Sequence[float | None]) -> list[float | None]:
    """Benjamini-Hochberg step-up adjusted p-values (false discovery rate; valid for
    independent or positively dependent tests, as comparisons sharing a control are). A None
    counts as p = 1 in the family and stays None."""
    filled = [1.0 if p is None else p for p in p_values]
    m = len(filled)
    adjusted = [0.0] * m
    running = 1.0
    order = sorted(range(m), key=filled.__getitem__)
    for rank in range(m, 0, -1):
        index = order[rank - 1]
        running = min(running, filled[index] * m / rank)
        adjusted[index] = running
    return [None if p is None else a for p, a in zip(p_values, adjusted, strict=True)]


def correct(p_values: Sequence[float | None], correction: str) -> list[float | None]:
    """The family's p-values adjusted by `correction` (one of CORRECTIONS)."""
    if correction == "bonferroni":
        return [None if p is None else bonferroni(p, len(p_values)) for p in p_values]
    if correction == "holm":
        return holm(p_values)
    if correction == "bh":
        return benjamini_hochberg(p_values)
    raise ValueError(f"unknown correction {correction!r} (known: {', '.join(CORRECTIONS)})")
