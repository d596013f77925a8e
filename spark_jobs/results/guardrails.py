"""Alert when a running experiment significantly lowers a guardrail metric.

The seed's first use case: an experiment that drops impressions must be shut down within
minutes. The `experiment_guardrails` DAG calls `check_guardrails` every 5 minutes; it judges
every running experiment the way the dashboard does (the configured test, after the SRM and
minimum-users checks) and sends one alert per drop through the alert channels. An alert is
sent once per (experiment, group, period, event type, metric): the `alerts` table remembers
which were sent, so reruns and the next runs do not repeat it.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from spark_jobs.contracts.tables import TABLE_ALERTS
from spark_jobs.control.alerts import Alert, send_alert
from spark_jobs.results.dashboard.results import ExperimentResult, load_results
from spark_jobs.results.verdicts import MetricResult
from spark_jobs.settings import Settings
from spark_jobs.streaming.lake.delta import read_arrow, table_exists

SOURCE = "experiment_guardrails"
KIND = "guardrail_drop"
log = logging.getLogger(__name__)

AlertKey = tuple[str, str, int, str]


def metric_name(result: MetricResult) -> str:
    return f"{result.event_type} {result.metric}"


def sent_keys(settings: Settings) -> set[AlertKey]:
    """(experiment, group, period start, metric) of every guardrail alert already sent."""
    uri = settings.lake.table(TABLE_ALERTS)
    if not table_exists(uri):
        return set()
    rows = read_arrow(uri, columns=["kind", "experiment_hash", "experiment_group", "metric",
                                    "details"]).to_pylist()
    keys = set()
    for row in rows:
        if row["kind"] != KIND:
            continue
        period_start = json.loads(row["details"] or "{}").get("period_start")
        keys.add((row["experiment_hash"], row["experiment_group"], period_start, row["metric"]))
    return keys


def drop_alert(experiment: ExperimentResult, result: MetricResult, settings: Settings,
               run_url: str | None) -> Alert:
    verdict = experiment.verdict
    test, p_value = verdict.test, result.p_verdict
    dashboard = f"http://{settings.dashboard.host}:{settings.dashboard.port}/"
    summary = (
        f"Experiment {experiment.experiment_hash}: {metric_name(result)} of "
        f"{result.treatment_group} is significantly below control: {_pct(result.lift)} "
        f"(interval {_pct(result.lift_low)} to {_pct(result.lift_high)}), {test}, "
        f"p = {p_value:.2g} < {settings.stats.alpha}. Consider shutting it down."
    )
    details: dict[str, Any] = {
        "period_start": experiment.period_start, "event_type": result.event_type,
        "lift": result.lift, "lift_low": result.lift_low, "lift_high": result.lift_high,
        "p_sequential": result.p_sequential, "p_bonferroni": result.p_bonferroni,
        "p_holm": result.p_holm, "p_bh": result.p_bh, "p_verdict": p_value,
        "method": verdict.method, "correction": verdict.correction,
        "dashboard": f"{dashboard}#{experiment.experiment_hash}",
    }
    return Alert(
        source=SOURCE, kind=KIND, summary=summary,
        experiment_hash=experiment.experiment_hash, experiment_group=result.treatment_group,
        window_end_ms=experiment.latest_window_end, metric=metric_name(result),
        observed=result.treatment, threshold=result.control, run_url=run_url, details=details,
    )


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.1%}"


def check_guardrails(settings: Settings, run_url: str | None = None) -> list[Alert]:
    """Send an alert for each new guardrail drop of a running experiment; returns them."""
    if not settings.stats.guardrail_events:
        return []
    sent = sent_keys(settings)
    alerts = []
    for experiment in load_results(settings).experiments:
        if not experiment.running or experiment.verdict.status != "loss":
            continue  # SRM and too-few-users verdicts are not trusted enough to alert on
        for result in experiment.verdict.guardrail_drops:
            key = (experiment.experiment_hash, result.treatment_group, experiment.period_start,
                   metric_name(result))
            if key in sent:
                continue
            alert = drop_alert(experiment, result, settings, run_url)
            send_alert(settings, alert)
            sent.add(key)
            alerts.append(alert)
    log.info("guardrails: %d new drop(s)", len(alerts))
    return alerts
