"""The dashboard's JSON: what the page needs from `Results`, apart from the routes (app.py).

The list carries one headline comparison per experiment so the page can show it without
fetching every experiment's series; the detail is the whole experiment (`as_json`) plus what
the page needs to describe the test and choose an event type. The live statistics (from the
provisional rows) go under their own key, `live`, in both: the final ones stay what they are.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from spark_jobs.results.dashboard.live import LiveResult
from spark_jobs.results.dashboard.results import ExperimentResult, Results, as_json
from spark_jobs.results.verdicts import ExperimentVerdict, MetricResult
from spark_jobs.settings import Settings

METRIC_LABELS = {"propensity": "propensity rate", "volume": "actions per triggered user"}


def describe_test(verdict: ExperimentVerdict, settings: Settings) -> str:
    """Which test and corrections the verdict uses, in the words the page shows."""
    return verdict.test


def decisive_p(metric: MetricResult, method: str) -> float | None:
    return metric.p_verdict


def headline(verdict: ExperimentVerdict) -> MetricResult | None:
    """The comparison that best explains the status: the significant ones first (drops first
    for a loss), then the smallest p-value of the test the verdict uses."""
    if not verdict.metrics:
        return None
    wanted = "down" if verdict.status == "loss" else "up" if verdict.status == "win" else None

    def key(m: MetricResult) -> tuple:
        p = decisive_p(m, verdict.method)
        return (not m.significant, m.direction != wanted, 1.0 if p is None else p,
                1.0 if m.p_fixed is None else m.p_fixed)

    return min(verdict.metrics, key=key)


def _headline_json(metric: MetricResult | None, method: str) -> dict[str, Any] | None:
    if metric is None:
        return None
    return as_json({
        "treatment_group": metric.treatment_group, "event_type": metric.event_type,
        "metric": metric.metric, "metric_label": METRIC_LABELS.get(metric.metric, metric.metric),
        "guardrail": metric.guardrail,
        "difference": metric.difference[-1] if metric.difference else None,
        "difference_low": metric.difference_low, "difference_high": metric.difference_high,
        "lift": metric.lift, "lift_low": metric.lift_low,
        "lift_high": metric.lift_high, "p": decisive_p(metric, method),
        "significant": metric.significant, "direction": metric.direction,
    })


def plan_json(verdict: ExperimentVerdict, settings: Settings) -> dict[str, Any] | None:
    """Progress toward the target sample size: that of the comparison furthest from it."""
    limiting = verdict.limiting
    if limiting is None or limiting.plan is None:
        return None
    return as_json({
        **dataclasses.asdict(limiting.plan), "treatment_group": limiting.treatment_group,
        "event_type": limiting.event_type, "metric": limiting.metric,
        "metric_label": METRIC_LABELS.get(limiting.metric, limiting.metric),
        "target_mde": settings.stats.target_mde, "target_power": settings.stats.power,
    })


def _verdict_json(verdict: ExperimentVerdict, settings: Settings) -> dict[str, Any]:
    return {
        "status": verdict.status, "label": verdict.label, "reason": verdict.reason,
        "method": verdict.method, "test": describe_test(verdict, settings),
        "looks": verdict.looks, "planned_looks": verdict.planned_looks,
        "comparisons": verdict.comparisons, "srm_p": verdict.srm_p,
        "triggered_users": verdict.triggered_users,
        "headline": _headline_json(headline(verdict), verdict.method),
        "plan": plan_json(verdict, settings),
    }


def live_json(live: LiveResult | None, settings: Settings, detail: bool = False
              ) -> dict[str, Any] | None:
    """The live statistics (provisional: open windows included), the whole verdict with its
    series in the detail."""
    if live is None:
        return None
    data = {"provisional": True, "updated_at": live.updated_at_ms, "watermark": live.watermark,
            "look_end": live.look_end, "period_start": live.period_start,
            **_verdict_json(live.verdict, settings)}
    return as_json(data | ({"verdict": live.verdict} if detail else {}))


def summary(result: ExperimentResult, settings: Settings) -> dict[str, Any]:
    return as_json({
        "hash": result.experiment_hash, "running": result.running, "final": result.final,
        "period_start": result.period_start, "period_end": result.period_end,
        "latest_window_end": result.latest_window_end,
        **_verdict_json(result.verdict, settings),
        "live": live_json(result.live, settings),
    })


def _header(results: Results, settings: Settings) -> dict[str, Any]:
    return {
        "as_of": results.as_of_ms, "loaded_at": results.loaded_at_ms,
        "table_version": results.table_version, "refresh_ms": settings.dashboard.refresh_ms,
        "live_version": results.live_version, "live_updated_at": results.live_updated_at_ms,
        "method": settings.stats.method, "correction": settings.stats.correction,
        "alpha": settings.stats.alpha,
        "srm_alpha": settings.stats.srm_alpha,
    }


def experiments_json(results: Results, settings: Settings) -> dict[str, Any]:
    return {**_header(results, settings),
            "experiments": [summary(e, settings) for e in results.experiments]}


def event_types(result: ExperimentResult, settings: Settings) -> list[str]:
    """The experiment's event types, critical ones first in the configured order."""
    verdicts = [result.verdict] + ([result.live.verdict] if result.live else [])
    present = {m.event_type for v in verdicts for m in v.metrics}
    present |= {event for v in verdicts for group in v.bands.values() for event in group}
    critical = [e for e in settings.experiments.critical_event_types if e in present]
    return critical + sorted(present - set(critical))


def _final_json(result: ExperimentResult) -> dict[str, Any]:
    """The experiment's final part (its live one goes under `live`)."""
    data = as_json(dataclasses.replace(result, live=None))
    del data["live"]
    return data


def experiment_json(results: Results, result: ExperimentResult, settings: Settings
                    ) -> dict[str, Any]:
    return {
        **_header(results, settings), **summary(result, settings),
        "event_types": event_types(result, settings),
        "guardrail_events": list(settings.stats.guardrail_events),
        "metric_labels": METRIC_LABELS,
        "experiment": _final_json(result),
        "live": live_json(result.live, settings, detail=True),
    }
