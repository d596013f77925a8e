"""Always-valid inference for results that are looked at after every window.

A fixed-horizon p-value checked after every window finds "significant" A/A differences far
more often than alpha. The mixture sequential probability ratio test (mSPRT, Johari et al.,
"Always valid inference", 2017) does not: with a normal mixing distribution N(0, tau^2) over
the true difference, the likelihood ratio of the estimated difference d with variance V is

    Lambda = sqrt(V / (V + tau^2)) * exp(tau^2 d^2 / (2 V (V + tau^2)))

a nonnegative martingale under the null, so by Ville's inequality P(any look has
Lambda >= 1/alpha) <= alpha. The always-valid p-value is the running minimum of 1/Lambda,
and {d : Lambda < 1/alpha} at each look is a confidence sequence; its running intersection
is still one. tau is `mixture_sd` standard deviations of one user's metric (a scale-free
choice: the test then depends only on z = d / sqrt(V) and the effective sample size).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from spark_jobs.results.stats import GroupCounts

METRICS = ("propensity", "volume")


@dataclass(frozen=True)
class Estimate:
    """Treatment minus control of one metric at one look, with what the tests need."""

    control: float
    treatment: float
    difference: float
    variance: float  # of the difference (unpooled)
    unit_variance: float  # pooled variance of one user's metric, to scale tau
    effective_n: float  # 1 / (1/n1 + 1/n2)


def estimate(control: GroupCounts, treatment: GroupCounts, metric: str) -> Estimate | None:
    """The difference of `metric` ("propensity": share of triggered users with the event;
    "volume": actions per triggered user), or None while a group has fewer than 2 users."""
    n1, n2 = control.triggered_users, treatment.triggered_users
    if n1 < 2 or n2 < 2:
        return None
    if metric == "propensity":
        m1, m2 = control.rate, treatment.rate
        v1, v2 = m1 * (1 - m1), m2 * (1 - m2)
        pooled = (control.propensity + treatment.propensity) / (n1 + n2)
        unit_variance = pooled * (1 - pooled)
    elif metric == "volume":
        m1, m2 = control.mean_actions, treatment.mean_actions
        v1, v2 = control.var_actions, treatment.var_actions
        unit_variance = ((n1 - 1) * v1 + (n2 - 1) * v2) / (n1 + n2 - 2)
    else:
        raise ValueError(f"unknown metric {metric!r} (known: {', '.join(METRICS)})")
    return Estimate(m1, m2, m2 - m1, v1 / n1 + v2 / n2, unit_variance, n1 * n2 / (n1 + n2))


def log_likelihood_ratio(difference: float, variance: float, tau2: float) -> float:
    """log Lambda of the normal-mixture SPRT (0 when the look carries no information)."""
    if variance <= 0 or tau2 <= 0:
        return 0.0
    total = variance + tau2
    return 0.5 * math.log(variance / total) + tau2 * difference**2 / (2 * variance * total)


def confidence_half_width(variance: float, tau2: float, alpha: float) -> float:
    """Half width of {d : Lambda(d) < 1/alpha} around the estimate (inf without information)."""
    if variance <= 0 or tau2 <= 0:
        return math.inf
    total = variance + tau2
    bound = 2 * math.log(1 / alpha) + math.log(total / variance)
    return math.sqrt(variance * total / tau2 * bound)


@dataclass(frozen=True)
class SequentialLook:
    """The test's state after one look: always-valid p and confidence sequence so far."""

    difference: float
    p_value: float
    ci_low: float
    ci_high: float


def sequential_test(estimates: Sequence[Estimate | None], alpha: float, mixture_sd: float
                    ) -> list[SequentialLook | None]:
    """One result per look (None before the first informative one): p is the running minimum
    of 1/Lambda, the interval the running intersection of the per-look sets."""
    looks: list[SequentialLook | None] = []
    p_value, low, high = 1.0, -math.inf, math.inf
    for est in estimates:
        if est is None:
            looks.append(None)
            continue
        tau2 = mixture_sd**2 * est.unit_variance
        log_lr = log_likelihood_ratio(est.difference, est.variance, tau2)
        p_value = min(p_value, math.exp(-log_lr) if log_lr > 0 else 1.0)
        half = confidence_half_width(est.variance, tau2, alpha)
        new_low, new_high = max(low, est.difference - half), min(high, est.difference + half)
        if new_low <= new_high:  # empty only with probability <= alpha: keep the last one
            low, high = new_low, new_high
        looks.append(SequentialLook(est.difference, p_value, low, high))
    return looks
