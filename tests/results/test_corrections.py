"""Holm and Benjamini-Hochberg beside Bonferroni (`stats.correction`): the adjusted p-values,
the setting's check, and verdicts that change with the correction."""

from __future__ import annotations

import dataclasses

import pytest

from spark_jobs.results.stats import (
    GroupCounts,
    benjamini_hochberg,
    bonferroni,
    correct,
    holm,
)
from spark_jobs.results.verdicts import GroupHistory, judge
from spark_jobs.settings import ConfigError, load_settings

PARAMS = load_settings(environ={}).stats
P = [0.01, 0.04, 0.03, 0.005]


def test_holm_by_hand():
    """Sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1, made monotone."""
    assert holm(P) == pytest.approx([0.03, 0.06, 0.06, 0.02], rel=1e-12)


def test_benjamini_hochberg_by_hand():
    """Sorted 0.005, 0.01, 0.03, 0.04 times 4/1, 4/2, 4/3, 4/4, minimum from the top."""
    assert benjamini_hochberg(P) == pytest.approx([0.02, 0.04, 0.04, 0.02], rel=1e-12)


def test_the_three_corrections_are_ordered():
    """BH <= Holm <= Bonferroni for every p, and all are capped at 1."""
    ps = [0.2, 0.5, 0.001, 0.9, 0.04, 0.04]
    bonf = [bonferroni(p, len(ps)) for p in ps]
    for b, h, f in zip(bonf, holm(ps), benjamini_hochberg(ps), strict=True):
        assert f is not None and h is not None
        assert f <= h <= b <= 1.0
    assert correct(ps, "bonferroni") == bonf
    assert correct(ps, "holm") == holm(ps) and correct(ps, "bh") == benjamini_hochberg(ps)


def test_a_comparison_without_a_test_counts_as_p_one_and_stays_none():
    assert holm([0.01, None, 0.02]) == [pytest.approx(0.03), None, pytest.approx(0.04)]
    assert benjamini_hochberg([0.01, None, 0.02]) == [pytest.approx(0.03), None,
                                                      pytest.approx(0.03)]
    assert correct([], "holm") == [] and correct([], "bh") == []


def test_an_unknown_correction_names_the_known_ones():
    with pytest.raises(ValueError, match="bonferroni, holm, bh"):
        correct([0.1], "fdr")


@pytest.mark.parametrize("value", ["fdr", "Holm ", "[holm]"])
def test_the_setting_is_checked_and_names_the_allowed_values(value):
    with pytest.raises(ConfigError) as info:
        load_settings(environ={"TIDELINE_STATS__CORRECTION": value})
    assert str(info.value).startswith("stats.correction must be one of bonferroni, holm, bh")


def test_the_setting_reads_each_allowed_value():
    for value in ("bonferroni", "holm", "bh"):
        assert load_settings(environ={"TIDELINE_STATS__CORRECTION": value}).stats.correction \
            == value
    assert PARAMS.correction == "bonferroni"


def _groups() -> list[GroupHistory]:
    """click rises in both metrics alike (each active user acts once, so the volume test is
    close to the rate test); impression does not move."""
    def series(click: float) -> dict:
        out: dict = {"click": [], "impression": []}
        for k in range(1, 13):
            n = 200 * k
            for event, rate in (("click", click), ("impression", 0.5)):
                active = round(n * rate)
                out[event].append((k * 3_600_000, GroupCounts(n, active, active, active)))
        return out
    return [GroupHistory("control", True, 0, 50.0, series(0.20)),
            GroupHistory("treatment", False, 0, 50.0, series(0.24))]


def test_the_correction_decides_the_fixed_horizon_verdict():
    """Two small p-values of about the same size and two large ones: with planned looks
    chosen between the corrections' thresholds, BH finds the win Bonferroni and Holm miss."""
    base = dataclasses.replace(PARAMS, method="bonferroni")
    probe = judge("exp", _groups(), planned_looks=1, params=base)
    clicks = sorted(m.p_fixed for m in probe.metrics if m.event_type == "click")
    assert clicks[1] < 2 * clicks[0]  # the two click p-values are close
    # Bonferroni rejects nothing when 4 L p_min > alpha, BH both when 2 L p_max < alpha
    looks = int(PARAMS.alpha / (3 * clicks[1]))
    assert looks > 12  # more than the looks made: the planned ones count
    assert 4 * looks * clicks[0] > PARAMS.alpha > 2 * looks * clicks[1]
    verdicts = {c: judge("exp", _groups(), planned_looks=looks,
                         params=dataclasses.replace(base, correction=c))
                for c in ("bonferroni", "holm", "bh")}
    assert verdicts["bonferroni"].status == verdicts["holm"].status == "none"
    assert verdicts["bh"].status == "win" and "Benjamini–Hochberg" in verdicts["bh"].reason
    win = [m for m in verdicts["bh"].metrics if m.significant]
    assert {(m.event_type, m.direction) for m in win} == {("click", "up")} and len(win) == 2
    assert all(m.p_verdict == m.p_bh for m in win)
    for correction, verdict in verdicts.items():
        assert verdict.correction == correction
        for m in verdict.metrics:  # every column is computed whichever decides
            assert m.p_bh <= m.p_holm <= m.p_bonferroni
            assert m.p_bonferroni == pytest.approx(min(1.0, m.p_looks * 4), rel=1e-12)
    assert verdicts["holm"].test == f"Bonferroni over {looks} looks, Holm across 4 comparisons"


def test_the_correction_also_applies_to_the_always_valid_p_values():
    params = dataclasses.replace(PARAMS, correction="holm")
    verdict = judge("exp", _groups(), planned_looks=24, params=params)
    always_valid = [m.p_always_valid for m in verdict.metrics]
    assert [m.p_sequential for m in verdict.metrics] == holm(always_valid)
    assert all(m.p_verdict == m.p_sequential for m in verdict.metrics)
    assert verdict.test == "mSPRT (always-valid sequential test), Holm across 4 comparisons"
    default = judge("exp", _groups(), planned_looks=24, params=PARAMS)
    assert [m.p_sequential for m in default.metrics] == [
        min(1.0, p * 4) for p in always_valid]  # Bonferroni, as before the setting
