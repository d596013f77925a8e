"""An experiment's verdict from its cumulative metric rows: what the dashboard shows.

For each treatment group, critical event type and metric (propensity rate, actions per
triggered user) every window is a look. Both tests are computed; `method` says which one
the verdict uses:
- "bonferroni" (the seed's first implementation): fixed-horizon tests (two-sample proportion
  z-test for propensity, Welch's t-test for actions per user) Bonferroni-corrected over the
  planned looks, the windows of a period (dividing by the looks made so far would not be
  valid: the sum of alpha/k diverges); the per-look intervals of the charts use the normal
  quantile (with >= min_users per group, t and z agree closely);
- "sequential": the mSPRT of `sequential.py`, valid however often the results are looked at.
Across the comparisons (groups x event types x metrics) `correction` adjusts the latest
look's p-values: Bonferroni (as the seed), Holm (family-wise too, never less powerful) or
Benjamini-Hochberg (false discovery rate). Intervals stay at the Bonferroni level.
Each comparison also gets its plan (`power.py`): power now, minimum detectable effect and
the sample size `target_mde` needs at alpha / comparisons; the experiment's progress is
that of the comparison furthest from its target.
The relative lift (treatment / control - 1) gets its delta-method interval (`relative.py`)
at the level of the test the verdict uses, beside the interval of the absolute difference.
Where the rows carry CUPED's sums, each comparison also gets its CUPED-adjusted difference
(`cuped.py`, x = each user's pre-exposure volume) with an interval at that same level and
the share of variance it removes; shown beside the plain one, it does not change the verdict.
A sample ratio mismatch (chi-square of triggered users against the allocation) makes the
comparison untrustworthy and wins over any other status; a significant drop of any metric is
a loss; otherwise any significant rise is a win. Higher counts are taken as better.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Protocol

from spark_jobs.results.cuped import cuped_of
from spark_jobs.results.power import Plan
from spark_jobs.results.power import plan as plan_of
from spark_jobs.results.relative import relative_lift
from spark_jobs.results.sequential import (
    METRICS,
    Estimate,
    confidence_half_width,
    estimate,
    sequential_test,
)
from spark_jobs.results.stats import (
    GroupCounts,
    benjamini_hochberg,
    bonferroni,
    correct,
    holm,
    proportion_test,
    sample_ratio_mismatch,
    welch_test,
)

STATUSES = {
    "win": "significant win",
    "loss": "significant loss",
    "srm": "sample ratio mismatch",
    "none": "no verdict yet",
}
CORRECTION_NAMES = {"bonferroni": "Bonferroni", "holm": "Holm", "bh": "Benjamini–Hochberg"}
_NORMAL = NormalDist()


class StatsParameters(Protocol):
    alpha: float
    method: str
    correction: str
    mixture_sd: float
    srm_alpha: float
    min_users: int
    power: float
    target_mde: float
    guardrail_events: tuple[str, ...]


@dataclass(frozen=True)
class GroupHistory:
    """One group's rows of its current period: event type -> [(window_end, counts)]."""

    group: str
    is_control: bool
    period_start: int
    allocation_pct: float | None
    series: Mapping[str, Sequence[tuple[int, GroupCounts]]]


@dataclass(frozen=True)
class Band:
    """A group's metric per window with a 1 - alpha interval (unadjusted, for the charts)."""

    window_end: list[int]
    value: list[float]
    low: list[float]
    high: list[float]


@dataclass(frozen=True)
class MetricResult:
    """One comparison (treatment group vs control, event type, metric) over its looks."""

    treatment_group: str
    event_type: str
    metric: str
    guardrail: bool
    window_end: list[int]
    difference: list[float | None]
    sequential_low: list[float | None]
    sequential_high: list[float | None]
    bonferroni_low: list[float | None]
    bonferroni_high: list[float | None]
    control: float | None = None
    treatment: float | None = None
    difference_low: float | None = None  # the interval of the verdict's test, latest look
    difference_high: float | None = None
    lift: float | None = None  # treatment / control - 1
    lift_low: float | None = None  # its delta-method interval (relative.py)
    lift_high: float | None = None
    p_fixed: float | None = None  # one look, one comparison
    p_looks: float | None = None  # p_fixed, Bonferroni over the planned looks only
    p_bonferroni: float | None = None  # p_looks, Bonferroni across the comparisons
    p_holm: float | None = None  # p_looks, Holm across the comparisons
    p_bh: float | None = None  # p_looks, Benjamini-Hochberg across the comparisons
    p_always_valid: float | None = None  # mSPRT, one comparison
    p_sequential: float | None = None  # p_always_valid, `correction` across the comparisons
    p_verdict: float | None = None  # the one the verdict uses
    significant: bool = False
    direction: str | None = None  # "up" or "down" when significant
    plan: Plan | None = None  # power now and the sample size the target effect needs
    cuped_difference: float | None = None  # CUPED-adjusted difference, latest look
    cuped_low: float | None = None  # its interval at the level of the verdict's test
    cuped_high: float | None = None
    cuped_reduction: float | None = None  # 1 - adjusted / plain variance of the difference


@dataclass(frozen=True)
class ExperimentVerdict:
    experiment_hash: str
    status: str
    reason: str
    method: str
    looks: int
    planned_looks: int  # windows of a period: what Bonferroni divides alpha by (with comparisons)
    comparisons: int
    srm_p: float | None
    triggered_users: dict[str, int]
    metrics: list[MetricResult] = field(default_factory=list)
    bands: dict[str, dict[str, dict[str, Band]]] = field(default_factory=dict)
    correction: str = "bonferroni"

    @property
    def label(self) -> str:
        return STATUSES[self.status]

    @property
    def test(self) -> str:
        """The verdict's test and corrections, in the words the page and alerts show."""
        if self.method == "sequential":
            test = "mSPRT (always-valid sequential test)"
            if self.correction == "bonferroni":
                return test
            return f"{test}, {CORRECTION_NAMES[self.correction]} across {self.comparisons} " \
                "comparisons"
        if self.correction == "bonferroni":
            return f"Bonferroni over {self.planned_looks} looks × {self.comparisons} comparisons"
        return (f"Bonferroni over {self.planned_looks} looks, "
                f"{CORRECTION_NAMES[self.correction]} across {self.comparisons} comparisons")

    @property
    def limiting(self) -> MetricResult | None:
        """The comparison furthest from its target sample size: the experiment's progress."""
        planned = [m for m in self.metrics if m.plan is not None]
        return min(planned, key=lambda m: m.plan.progress if m.plan else 0.0, default=None)

    @property
    def guardrail_drops(self) -> list[MetricResult]:
        return [m for m in self.metrics if m.guardrail and m.direction == "down"]


def metric_value(counts: GroupCounts, metric: str) -> float:
    return counts.rate if metric == "propensity" else counts.mean_actions


def group_band(series: Sequence[tuple[int, GroupCounts]], metric: str, alpha: float) -> Band:
    """Per window: the group's rate (Wald) or mean actions per user (normal) with interval."""
    z = _NORMAL.inv_cdf(1 - alpha / 2)
    ends, values, lows, highs = [], [], [], []
    for window_end, counts in series:
        n = counts.triggered_users
        value = metric_value(counts, metric)
        variance = value * (1 - value) if metric == "propensity" else counts.var_actions
        half = z * math.sqrt(variance / n) if n else 0.0
        ends.append(window_end)
        values.append(value)
        lows.append(value - half)
        highs.append(value + half)
    return Band(ends, values, lows, highs)


def _common_looks(control: Sequence[tuple[int, GroupCounts]],
                  treatment: Sequence[tuple[int, GroupCounts]]
                  ) -> list[tuple[int, GroupCounts, GroupCounts]]:
    treated = dict(treatment)
    return [(end, counts, treated[end]) for end, counts in control if end in treated]


def compare(treatment_group: str, event_type: str, metric: str,
            looks: Sequence[tuple[int, GroupCounts, GroupCounts]], comparisons: int,
            planned_looks: int, params: StatsParameters) -> MetricResult:
    """Both tests at every look; the latest look's p-values are corrected across the
    comparisons and judged afterwards (`decide`: Holm and BH need the whole family)."""
    estimates: list[Estimate | None] = [estimate(c, t, metric) for _, c, t in looks]
    family_alpha = params.alpha / comparisons
    sequential = sequential_test(estimates, family_alpha, params.mixture_sd)
    bonf_low: list[float | None] = []
    bonf_high: list[float | None] = []
    p_fixed = p_looks = p_bonf = None
    tests = max(planned_looks, len(looks)) * comparisons
    z = _NORMAL.inv_cdf(1 - params.alpha / (2 * tests))
    for est in estimates:
        if est is None or est.variance <= 0:
            bonf_low.append(None)
            bonf_high.append(None)
            continue
        se = math.sqrt(est.variance)
        bonf_low.append(est.difference - z * se)
        bonf_high.append(est.difference + z * se)
    if estimates and estimates[-1] is not None:
        _, control_counts, treatment_counts = looks[-1]
        fixed_test = proportion_test if metric == "propensity" else welch_test
        p_fixed = fixed_test(control_counts, treatment_counts, params.alpha).p_value
        p_bonf = bonferroni(p_fixed, tests)
        p_looks = bonferroni(p_fixed, max(planned_looks, len(looks)))
    result = MetricResult(
        treatment_group, event_type, metric, event_type in params.guardrail_events,
        window_end=[end for end, _, _ in looks],
        difference=[None if e is None else e.difference for e in estimates],
        sequential_low=[None if s is None else _finite(s.ci_low) for s in sequential],
        sequential_high=[None if s is None else _finite(s.ci_high) for s in sequential],
        bonferroni_low=bonf_low, bonferroni_high=bonf_high,
    )
    last = estimates[-1] if estimates else None
    last_seq = sequential[-1] if sequential else None
    if last is None or last_seq is None:
        return result
    if params.method == "sequential":
        low, high = last_seq.ci_low, last_seq.ci_high
    else:
        low, high = bonf_low[-1], bonf_high[-1]
    lift_low, lift_high = _relative_interval(looks[-1], last, metric, tests, comparisons,
                                             params)
    cuped = _cuped(looks[-1], last, metric, tests, comparisons, params)
    return dataclasses.replace(
        result, control=last.control, treatment=last.treatment,
        difference_low=_finite(low), difference_high=_finite(high),
        lift=None if last.control == 0 else last.difference / last.control,
        lift_low=lift_low, lift_high=lift_high, p_fixed=p_fixed, p_looks=p_looks,
        p_bonferroni=p_bonf, p_always_valid=last_seq.p_value,
        plan=plan_of(looks[-1][1], looks[-1][2], metric, family_alpha, params.power,
                     params.target_mde),
        **cuped,
    )


def decide(metrics: Sequence[MetricResult], params: StatsParameters) -> list[MetricResult]:
    """Each comparison's p-values corrected across the family (every comparison of the
    experiment at its latest look; one without a test yet counts as p = 1) and its
    significance by the test the verdict uses. The intervals stay at the Bonferroni level:
    Holm and BH adjust p-values, no interval matches them exactly."""
    looks = [m.p_looks for m in metrics]
    holm_p, bh_p = holm(looks), benjamini_hochberg(looks)
    sequential_p = correct([m.p_always_valid for m in metrics], params.correction)
    decided = []
    for m, p_holm, p_bh, p_seq in zip(metrics, holm_p, bh_p, sequential_p, strict=True):
        fixed = {"bonferroni": m.p_bonferroni, "holm": p_holm, "bh": p_bh}[params.correction]
        p_verdict = p_seq if params.method == "sequential" else fixed
        significant = p_verdict is not None and p_verdict < params.alpha
        last = m.difference[-1] if m.difference else None
        decided.append(dataclasses.replace(
            m, p_holm=p_holm, p_bh=p_bh, p_sequential=p_seq, p_verdict=p_verdict,
            significant=significant and last is not None,
            direction=("up" if last > 0 else "down") if significant and last is not None
            else None,
        ))
    return decided


def _relative_interval(look: tuple[int, GroupCounts, GroupCounts], last: Estimate, metric: str,
                       tests: int, comparisons: int, params: StatsParameters
                       ) -> tuple[float | None, float | None]:
    """The delta-method interval of the relative lift at the latest look, at the level of the
    test the verdict uses (the mSPRT boundary or Bonferroni over looks x comparisons)."""
    _, control_counts, treatment_counts = look
    relative = relative_lift(control_counts, treatment_counts, metric)
    if relative is None or relative.variance <= 0:
        return None, None
    if params.method == "sequential":
        tau2 = params.mixture_sd**2 * last.unit_variance
        low, high = relative.sequential_interval(tau2, params.alpha / comparisons)
    else:
        low, high = relative.fixed_interval(params.alpha / tests)
    return _finite(low), _finite(high)


def _cuped(look: tuple[int, GroupCounts, GroupCounts], last: Estimate, metric: str,
           tests: int, comparisons: int, params: StatsParameters) -> dict[str, float | None]:
    """The CUPED fields of a comparison at its latest look (none without the sums): the
    interval uses the critical value of the verdict's test, like the plain difference's."""
    _, control_counts, treatment_counts = look
    cuped = cuped_of(control_counts, treatment_counts, metric)
    if cuped is None or cuped.variance <= 0:
        return {}
    if params.method == "sequential":
        tau2 = params.mixture_sd**2 * last.unit_variance
        half = confidence_half_width(cuped.variance, tau2, params.alpha / comparisons)
    else:
        half = _NORMAL.inv_cdf(1 - params.alpha / (2 * tests)) * math.sqrt(cuped.variance)
    return {"cuped_difference": cuped.difference,
            "cuped_low": _finite(cuped.difference - half),
            "cuped_high": _finite(cuped.difference + half),
            "cuped_reduction": cuped.reduction}


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def judge(experiment_hash: str, groups: Sequence[GroupHistory], planned_looks: int,
          params: StatsParameters) -> ExperimentVerdict:
    """The verdict of one experiment from each group's current period; `planned_looks` is
    the number of windows in a period."""
    controls = [g for g in groups if g.is_control]
    treatments = [g for g in groups if not g.is_control]
    triggered = {g.group: _latest_triggered(g) for g in groups}
    bands = {
        g.group: {event: {metric: group_band(rows, metric, params.alpha) for metric in METRICS}
                  for event, rows in g.series.items()}
        for g in groups
    }
    event_types = sorted({event for g in groups for event in g.series})
    comparisons = max(1, len(treatments) * len(event_types) * len(METRICS))

    def verdict(status: str, reason: str, metrics: list[MetricResult] | None = None,
                srm_p: float | None = None, looks: int = 0) -> ExperimentVerdict:
        return ExperimentVerdict(experiment_hash, status, reason, params.method, looks,
                                 max(planned_looks, looks), comparisons, srm_p, triggered,
                                 metrics or [], bands, params.correction)

    if len(controls) != 1 or not treatments:
        return verdict("none", "needs one control group and at least one treatment group")
    control = controls[0]
    metrics = decide([
        compare(t.group, event, metric,
                _common_looks(control.series.get(event, ()), t.series.get(event, ())),
                comparisons, planned_looks, params)
        for t in treatments for event in event_types for metric in METRICS
    ], params)
    looks = max((len(m.window_end) for m in metrics), default=0)
    short = [g for g in groups if triggered[g.group] < params.min_users]
    if short:
        names = ", ".join(sorted(g.group for g in short))
        return verdict("none", f"waiting for {params.min_users} triggered users in {names}",
                       metrics, looks=looks)
    srm_p = _srm(groups, triggered)
    if srm_p is not None and srm_p < params.srm_alpha:
        return verdict("srm", f"triggered users do not match the allocation "
                       f"(chi-square p = {srm_p:.2g} < {params.srm_alpha})", metrics, srm_p, looks)
    if params.correction == "bonferroni":
        test = "mSPRT" if params.method == "sequential" else "Bonferroni-corrected z-test"
    else:
        test = "mSPRT" if params.method == "sequential" else "z-test, Bonferroni over looks"
        test = f"{test}, {CORRECTION_NAMES[params.correction]} across comparisons"
    down = [m for m in metrics if m.direction == "down"]
    up = [m for m in metrics if m.direction == "up"]
    if down:
        return verdict("loss", f"{_describe(down)} dropped ({test})", metrics, srm_p, looks)
    if up:
        return verdict("win", f"{_describe(up)} rose ({test})", metrics, srm_p, looks)
    return verdict("none", f"no significant difference yet ({test})", metrics, srm_p, looks)


def _latest_triggered(group: GroupHistory) -> int:
    latest = [rows[-1] for rows in group.series.values() if rows]
    return max(latest, key=lambda row: row[0])[1].triggered_users if latest else 0


def _srm(groups: Sequence[GroupHistory], triggered: Mapping[str, int]) -> float | None:
    if any(g.allocation_pct is None or g.allocation_pct <= 0 for g in groups):
        return None
    return sample_ratio_mismatch([triggered[g.group] for g in groups],
                                 [float(g.allocation_pct or 0) for g in groups])


def _describe(results: Sequence[MetricResult]) -> str:
    return ", ".join(f"{m.event_type} {m.metric} of {m.treatment_group}" for m in results)
