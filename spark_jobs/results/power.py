"""Power, minimum detectable effect and the sample size an experiment needs.

The plan of one comparison is that of a single fixed-horizon two-sided z-test at the end,
with both groups taken to have the control's per-user variance (sigma^2 = p(1 - p) for a
rate, the sample variance of actions per user otherwise), as peers' planners do. For groups
of n1 and n2 users and d = |effect| / (sigma sqrt(1/n1 + 1/n2)):

    power = Phi(d - z) + Phi(-d - z),   z = the 1 - alpha/2 normal quantile
    MDE   = (z + z_power) sigma sqrt(1/n1 + 1/n2)            (the far tail neglected)
    n1    = (z + z_power)^2 sigma^2 (1 + 1/k) / effect^2,     n2 = k n1

Repeated looks cost users: the sequential test and Bonferroni over the looks need more than
this plan says, so 100 % progress means "powered for one final look", not "verdict due".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

from spark_jobs.results.relative import metric_moments
from spark_jobs.results.stats import GroupCounts

_NORMAL = NormalDist()


def _critical(alpha: float) -> float:
    return _NORMAL.inv_cdf(1 - alpha / 2)


def power(effect: float, sd: float, n1: float, n2: float, alpha: float) -> float:
    """Probability that the two-sided z-test at `alpha` rejects when the true difference is
    `effect` (both tails counted)."""
    if sd <= 0:
        return 1.0 if effect != 0 else alpha
    d = abs(effect) / (sd * math.sqrt(1 / n1 + 1 / n2))
    z = _critical(alpha)
    return _NORMAL.cdf(d - z) + _NORMAL.cdf(-d - z)


def minimum_detectable_effect(sd: float, n1: float, n2: float, alpha: float,
                              target_power: float) -> float:
    """The smallest absolute difference detected with `target_power` at `alpha`."""
    return (_critical(alpha) + _NORMAL.inv_cdf(target_power)) * sd * math.sqrt(1 / n1 + 1 / n2)


def sample_size(effect: float, sd: float, alpha: float, target_power: float,
                ratio: float = 1.0) -> float:
    """Users needed in the first group (the second has `ratio` times as many) to detect an
    absolute difference `effect` with `target_power` at `alpha` (not rounded)."""
    if effect == 0:
        raise ValueError("a zero effect cannot be detected")
    if ratio <= 0:
        raise ValueError("ratio must be positive")
    z = _critical(alpha) + _NORMAL.inv_cdf(target_power)
    return z**2 * sd**2 * (1 + 1 / ratio) / effect**2


@dataclass(frozen=True)
class Plan:
    """One comparison's power now and what it needs, relative to the control's value."""

    mde: float  # relative lift detectable now with the target power
    power: float  # power now to detect the target relative lift
    control_users: int  # users each group needs at the current split: control ...
    treatment_users: int  # ... and treatment
    progress: float  # share of the needed sample reached (may pass 1)


def plan(control: GroupCounts, treatment: GroupCounts, metric: str, alpha: float,
         target_power: float, target_mde: float) -> Plan | None:
    """The plan from the latest counts; None while it cannot be computed (fewer than 2 users
    in a group, or a control whose value or variance is still 0)."""
    n1, n2 = control.triggered_users, treatment.triggered_users
    if n1 < 2 or n2 < 2:
        return None
    mean, unit_variance = metric_moments(control, metric)
    sd = math.sqrt(unit_variance)
    if mean == 0 or sd == 0:
        return None
    effect = target_mde * abs(mean)
    needed = sample_size(effect, sd, alpha, target_power, ratio=n2 / n1)
    control_users = math.ceil(needed)
    return Plan(
        mde=minimum_detectable_effect(sd, n1, n2, alpha, target_power) / abs(mean),
        power=power(effect, sd, n1, n2, alpha),
        control_users=control_users,
        treatment_users=math.ceil(needed * n2 / n1),
        progress=n1 / needed,
    )
