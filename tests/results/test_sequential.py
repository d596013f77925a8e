"""The sequential test keeps its false-positive rate under peeking after every window, and
still finds real effects (seeded simulations of cumulative group counts)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from spark_jobs.results.sequential import (
    confidence_half_width,
    estimate,
    log_likelihood_ratio,
    sequential_test,
)
from spark_jobs.results.stats import GroupCounts, bonferroni, proportion_test

ALPHA = 0.05
LOOKS = 30
USERS_PER_LOOK = 40


def simulate(seed: int, runs: int, control_rate: float, treatment_rate: float
             ) -> list[list[tuple[GroupCounts, GroupCounts]]]:
    """Cumulative counts per look: each user has Poisson actions, zero w.p. 1 - rate."""
    rng = np.random.default_rng(seed)

    def group(rate: float) -> np.ndarray:
        shape = (runs, LOOKS, USERS_PER_LOOK)
        active = rng.random(shape) < rate
        actions = np.where(active, 1 + rng.poisson(1.0, shape), 0)
        per_look = np.stack([
            np.full((runs, LOOKS), USERS_PER_LOOK), active.sum(2), actions.sum(2),
            (actions**2).sum(2),
        ], axis=-1)
        return per_look.cumsum(axis=1)

    control, treatment = group(control_rate), group(treatment_rate)
    return [[(GroupCounts(*map(int, control[r, k])), GroupCounts(*map(int, treatment[r, k])))
             for k in range(LOOKS)] for r in range(runs)]


def rejects_sequentially(run, metric: str) -> bool:
    looks = sequential_test([estimate(c, t, metric) for c, t in run], ALPHA, 0.1)
    return any(look is not None and look.p_value < ALPHA for look in looks)


def rejects_when_peeking(run, metric: str, planned_looks: int) -> bool:
    """A fixed-horizon z-test looked at after every window, Bonferroni over planned looks."""
    from scipy.stats import norm

    for c, t in run:
        est = estimate(c, t, metric)
        if est is None or est.variance <= 0:
            continue
        p = 2 * norm.sf(abs(est.difference) / math.sqrt(est.variance))
        if bonferroni(p, planned_looks) < ALPHA:
            return True
    return False


@pytest.fixture(scope="module")
def aa_runs():
    return simulate(seed=11, runs=600, control_rate=0.3, treatment_rate=0.3)


@pytest.mark.parametrize("metric", ["propensity", "volume"])
def test_a_a_false_positive_rate_stays_below_alpha_over_all_looks(aa_runs, metric):
    rate = np.mean([rejects_sequentially(run, metric) for run in aa_runs])
    assert rate <= ALPHA, f"mSPRT rejected {rate:.3f} of A/A runs at some look"


def test_peeking_at_a_fixed_horizon_test_inflates_false_positives(aa_runs):
    """Why a correction is needed: the same A/A runs, a naive test after every window."""
    naive = np.mean([rejects_when_peeking(run, "propensity", 1) for run in aa_runs])
    corrected = np.mean([rejects_when_peeking(run, "propensity", LOOKS) for run in aa_runs])
    assert naive > 2 * ALPHA, naive
    assert corrected <= ALPHA, corrected


@pytest.mark.parametrize("metric", ["propensity", "volume"])
def test_a_real_effect_is_detected(metric):
    runs = simulate(seed=5, runs=100, control_rate=0.3, treatment_rate=0.4)
    power = np.mean([rejects_sequentially(run, metric) for run in runs])
    assert power >= 0.9, f"found the effect in only {power:.2f} of runs"


def test_the_confidence_sequence_edge_is_where_the_likelihood_ratio_reaches_one_over_alpha():
    variance, tau2 = 0.0004, 0.002
    half = confidence_half_width(variance, tau2, ALPHA)
    assert log_likelihood_ratio(half, variance, tau2) == pytest.approx(math.log(1 / ALPHA))
    assert log_likelihood_ratio(0.0, variance, tau2) < 0


def test_the_sequential_p_value_only_falls_and_the_interval_only_narrows():
    run = simulate(seed=3, runs=1, control_rate=0.3, treatment_rate=0.36)[0]
    looks = [x for x in sequential_test([estimate(c, t, "propensity") for c, t in run],
                                        ALPHA, 0.1) if x is not None]
    assert all(b.p_value <= a.p_value for a, b in itertools.pairwise(looks))
    assert all(b.ci_low >= a.ci_low and b.ci_high <= a.ci_high
               for a, b in itertools.pairwise(looks))


def test_the_sequential_interval_is_wider_than_the_fixed_horizon_one():
    control, treatment = GroupCounts(2000, 600, 900, 2000), GroupCounts(2000, 680, 1000, 2200)
    fixed = proportion_test(control, treatment, ALPHA)
    look = sequential_test([estimate(control, treatment, "propensity")], ALPHA, 0.1)[0]
    assert look.ci_low < fixed.ci_low and look.ci_high > fixed.ci_high


def test_a_group_with_fewer_than_two_users_gives_no_estimate():
    assert estimate(GroupCounts(1, 1, 1, 1), GroupCounts(5, 2, 3, 5), "volume") is None
    with pytest.raises(ValueError, match="unknown metric"):
        estimate(GroupCounts(5, 1, 1, 1), GroupCounts(5, 2, 3, 5), "clicks")
