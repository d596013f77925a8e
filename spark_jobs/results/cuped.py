"""CUPED (Deng et al., 2013): a metric's variance reduced with each user's pre-exposure value.

experiment_metrics holds per group, event type and window the sums over triggered users of
the pre-exposure volume x (pre_volume Σx, pre_volume_sum_squares Σx²) and of its products
with the metric y (pre_volume_x_volume Σxy; for the rate, pre_volume_x_propensity
Σ x [y > 0]), beside the n, Σy and Σy² of the metric. From those sums alone, with theta
pooled within the groups (as the regression y ~ treatment + x estimates it):

    theta   = Σ_g S_xy(g) / Σ_g S_xx(g)         S: sums of centered products in group g
    mean_g  = ȳ_g - theta (x̄_g - x̄)             x̄: over all users of the comparison
    Var     = (s²_y - 2 theta s_xy + theta² s²_x) / n_g    per group, s: sample moments

The difference of the adjusted means equals the treatment coefficient of that regression;
the variance shrinks by about the squared correlation of x and y. Pure Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from spark_jobs.results.stats import GroupCounts


@dataclass(frozen=True)
class CupedSums:
    """One group's sums over its triggered users: y the metric, x the pre-exposure value."""

    n: int
    sum_y: float
    sum_y2: float
    sum_x: float
    sum_x2: float
    sum_xy: float

    def centered(self) -> tuple[float, float, float]:
        """S_xx, S_yy, S_xy: sums of squares and products around the group's means."""
        n = self.n
        return (self.sum_x2 - self.sum_x**2 / n, self.sum_y2 - self.sum_y**2 / n,
                self.sum_xy - self.sum_x * self.sum_y / n)


@dataclass(frozen=True)
class Adjusted:
    """A group's CUPED-adjusted mean and the variance of that mean, and the unadjusted ones."""

    mean: float
    variance: float
    raw_mean: float
    raw_variance: float


def theta(groups: Sequence[CupedSums]) -> float:
    """The within-groups pooled regression slope of y on x (0 when x does not vary)."""
    if any(g.n < 2 for g in groups):
        raise ValueError("CUPED needs at least 2 users per group")
    sxx = sum(g.centered()[0] for g in groups)
    sxy = sum(g.centered()[2] for g in groups)
    return 0.0 if sxx <= 0 else sxy / sxx


def adjust(groups: Sequence[CupedSums], slope: float | None = None) -> list[Adjusted]:
    """Each group's adjusted mean and variance, with `slope` (default: pooled `theta`)."""
    slope = theta(groups) if slope is None else slope
    x_bar = sum(g.sum_x for g in groups) / sum(g.n for g in groups)
    adjusted = []
    for g in groups:
        sxx, syy, sxy = g.centered()
        var_x, var_y, cov = sxx / (g.n - 1), max(0.0, syy / (g.n - 1)), sxy / (g.n - 1)
        residual = max(0.0, var_y - 2 * slope * cov + slope**2 * var_x)
        y_bar = g.sum_y / g.n
        adjusted.append(Adjusted(y_bar - slope * (g.sum_x / g.n - x_bar), residual / g.n,
                                 y_bar, var_y / g.n))
    return adjusted


@dataclass(frozen=True)
class CupedDifference:
    """Treatment minus control, adjusted; `reduction` is 1 - adjusted / raw variance."""

    difference: float
    variance: float
    raw_difference: float
    raw_variance: float

    @property
    def reduction(self) -> float:
        return 0.0 if self.raw_variance == 0 else 1 - self.variance / self.raw_variance


def cuped_difference(control: CupedSums, treatment: CupedSums) -> CupedDifference:
    """The CUPED estimate of treatment - control and its variance (groups independent)."""
    c, t = adjust([control, treatment])
    return CupedDifference(t.mean - c.mean, t.variance + c.variance,
                           t.raw_mean - c.raw_mean, t.raw_variance + c.raw_variance)


def sums_of(counts: GroupCounts, metric: str) -> CupedSums | None:
    """A group's CUPED sums for "volume" (actions per user) or "propensity" (the rate, y is
    0/1 so Σy² = Σy); None without the pre-exposure sums."""
    if counts.pre is None:
        return None
    sum_x, sum_x2, x_volume, x_propensity = counts.pre
    if metric == "volume":
        sum_y, sum_y2, sum_xy = counts.volume, counts.volume_sum_squares, x_volume
    elif metric == "propensity":
        sum_y, sum_y2, sum_xy = counts.propensity, counts.propensity, x_propensity
    else:
        raise ValueError(f"unknown metric {metric!r} (known: propensity, volume)")
    return CupedSums(counts.triggered_users, sum_y, sum_y2, sum_x, sum_x2, sum_xy)


def cuped_of(control: GroupCounts, treatment: GroupCounts, metric: str
             ) -> CupedDifference | None:
    """The CUPED estimate of one comparison, or None when a group lacks the sums or has
    fewer than 2 users."""
    sums = (sums_of(control, metric), sums_of(treatment, metric))
    if sums[0] is None or sums[1] is None or min(s.n for s in sums) < 2:
        return None
    return cuped_difference(sums[0], sums[1])
