"""Relative lift (treatment / control - 1) with its delta-method interval.

Dividing the interval of the difference by the control's value ignores that the control's
value is itself an estimate; the delta method does not. For L = m2 / m1 - 1 with independent
group means of variances v1 and v2 (variances of the means, not of one user's metric), the
first-order expansion gives

    Var(L) = v2 / m1^2 + m2^2 v1 / m1^4

as GrowthBook and Eppo compute it. The interval is L +- c sqrt(Var(L)) with the critical
value c of the test the verdict uses: the normal quantile at the Bonferroni level, or the
mSPRT boundary with the mixing spread moved to the relative scale (tau / m1). Pure Python.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

from spark_jobs.results.sequential import confidence_half_width
from spark_jobs.results.stats import GroupCounts

_NORMAL = NormalDist()


@dataclass(frozen=True)
class RelativeLift:
    """treatment / control - 1 of one metric, and its delta-method variance."""

    control: float
    treatment: float
    lift: float
    variance: float

    @property
    def std_error(self) -> float:
        return math.sqrt(self.variance)

    def interval(self, half_width: float) -> tuple[float, float]:
        return self.lift - half_width, self.lift + half_width

    def fixed_interval(self, alpha: float) -> tuple[float, float]:
        """The two-sided 1 - alpha normal interval."""
        return self.interval(_NORMAL.inv_cdf(1 - alpha / 2) * self.std_error)

    def sequential_interval(self, tau2: float, alpha: float) -> tuple[float, float]:
        """The mSPRT confidence set at this look for a mixing variance `tau2` given on the
        absolute scale of the difference (it is divided by control^2 here)."""
        return self.interval(confidence_half_width(self.variance, tau2 / self.control**2, alpha))

    @property
    def p_value(self) -> float:
        """Two-sided Wald p-value of L = 0 with the delta-method standard error."""
        if self.variance <= 0:
            return 1.0 if self.lift == 0 else 0.0
        return 2.0 * (1.0 - _NORMAL.cdf(abs(self.lift) / self.std_error))


def delta_method(control_mean: float, control_var: float, treatment_mean: float,
                 treatment_var: float) -> RelativeLift | None:
    """The relative lift from each group's mean and the variance of that mean; None when the
    control's mean is 0 (no relative scale)."""
    if control_mean == 0:
        return None
    m1, m2 = control_mean, treatment_mean
    variance = treatment_var / m1**2 + m2**2 * control_var / m1**4
    return RelativeLift(m1, m2, m2 / m1 - 1, variance)


def metric_moments(counts: GroupCounts, metric: str) -> tuple[float, float]:
    """A group's metric ("propensity" rate or "volume" actions per user) and one user's
    variance of it: p(1 - p), or the sample variance of actions per user."""
    if counts.triggered_users == 0:
        raise ValueError("a group without triggered users has no mean")
    if metric == "propensity":
        return counts.rate, counts.rate * (1 - counts.rate)
    if metric == "volume":
        return counts.mean_actions, counts.var_actions
    raise ValueError(f"unknown metric {metric!r} (known: propensity, volume)")


def relative_lift(control: GroupCounts, treatment: GroupCounts, metric: str
                  ) -> RelativeLift | None:
    """The relative lift of `metric` from the two groups' counts (None: control mean 0)."""
    m1, v1 = metric_moments(control, metric)
    m2, v2 = metric_moments(treatment, metric)
    return delta_method(m1, v1 / control.triggered_users, m2, v2 / treatment.triggered_users)
