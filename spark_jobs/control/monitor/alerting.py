"""Alerts for unhealthy jobs, sent once per incident rather than once per watch pass.

The DAG watches every minute; a job lagging for an hour must not raise sixty alerts. A
problem alerts when it appears and again every `monitor.restart_window` while it lasts (the
same period over which restarts are judged); a crash that the monitor restarts always
alerts, each restart being news. What was sent when is kept in `_run/<job>.alerts.json`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from spark_jobs.control.monitor.health import DOWN, FAILED, LAGGING, RESTART_LOOP, STALE, Problem
from spark_jobs.control.monitor.state_files import read_json, run_dir, write_json
from spark_jobs.settings import Settings

log = logging.getLogger(__name__)

SOURCE = "streaming_jobs"
ALERT_KINDS = {
    DOWN: "job_down",
    FAILED: "job_failed",
    STALE: "job_stale",
    LAGGING: "job_lagging",
    RESTART_LOOP: "restart_loop",
}
CRASHES = frozenset({DOWN, FAILED})


def alerts_due(
    kinds: Sequence[str],
    restarted: bool,
    last_sent: Mapping[str, int],
    now_ms: int,
    repeat_after_ms: int,
) -> tuple[list[str], dict[str, int]]:
    """The problem kinds to alert now, and what to keep remembering of the others (the caller
    adds the kinds it managed to send). Problems that went away are forgotten, so their
    return alerts at once."""
    due: list[str] = []
    memory: dict[str, int] = {}
    for kind in dict.fromkeys(kinds):
        sent = last_sent.get(kind)
        if (restarted and kind in CRASHES) or sent is None or now_ms - sent >= repeat_after_ms:
            due.append(kind)
        else:
            memory[kind] = sent
    return due, memory


def _memory(settings: Settings, job: str) -> dict[str, int]:
    value = read_json(run_dir(settings) / f"{job}.alerts.json")
    if not isinstance(value, dict):
        return {}
    return {str(k): int(v) for k, v in value.items() if isinstance(v, int | float)}


def send_job_alerts(
    settings: Settings,
    job: str,
    problems: Sequence[Problem],
    restarted: bool,
    actions: Sequence[str],
    now_ms: int,
    run_url: str | None,
    details: Mapping[str, Any],
) -> list[str]:
    """Send the alerts that are due for the job's problems; returns the alert kinds sent.
    A crash alert says what the monitor did about it (`actions`).

    A failed send is logged and retried on the next pass (it is not remembered as sent).
    """
    from spark_jobs.control.alerts import Alert, send_alert

    by_kind = {p.kind: p for p in problems}
    due, memory = alerts_due(
        list(by_kind), restarted, _memory(settings, job), now_ms,
        settings.monitor.restart_window_ms,
    )
    sent = []
    for kind in due:
        problem = by_kind[kind]
        done = f"; {'; '.join(actions)}" if actions and kind in CRASHES else ""
        alert = Alert(
            source=SOURCE,
            kind=ALERT_KINDS[kind],
            summary=f"{job}: {problem.message}{done}",
            metric=problem.metric,
            observed=problem.observed,
            threshold=problem.threshold,
            run_url=run_url,
            details={"job": job, "actions": list(actions), **details},
        )
        try:
            send_alert(settings, alert)
        except Exception as exc:  # an alert that cannot be written must not stop the watch
            log.error("could not send %s alert for %s: %s", alert.kind, job, exc)
            continue
        memory[kind] = now_ms
        sent.append(alert.kind)
    write_json(run_dir(settings) / f"{job}.alerts.json", memory)
    return sent
