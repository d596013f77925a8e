"""The entry points the `streaming_jobs` DAG calls every minute: keep each job running, judge
its health, alert, and say so in one line per job.

`watch_job` starts a job that never ran (or was stopped on purpose), restarts one that died
or failed (it resumes exactly-once from its checkpoint) unless it is in a restart loop,
and alerts on every problem `health` finds. `job_status` is the same judgement without
acting, for `tideline jobs status`.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from spark_jobs.catalog import job as catalog_job
from spark_jobs.control.monitor.alerting import send_job_alerts
from spark_jobs.control.monitor.health import DOWN, JobHealth, Problem, RunFacts, assess_health
from spark_jobs.control.monitor.lag import topic_end_offsets
from spark_jobs.control.monitor.pidfile import RunRecord, read_record
from spark_jobs.control.monitor.reports import last_batch_report, latest_report
from spark_jobs.control.monitor.restarts import load_restarts, record_restart
from spark_jobs.control.monitor.summary import describe
from spark_jobs.control.monitor.supervisor import (
    is_alive,
    job_lock,
    log_path,
    start_job_process,
    stop_job,
)
from spark_jobs.settings import Settings
from spark_jobs.streaming.drops import read_totals
from spark_jobs.streaming.progress import progress_dir

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


def inspect_job(
    settings: Settings, job: str, now_ms: int | None = None
) -> tuple[JobHealth, RunRecord | None]:
    """The job's health and its pid file (None when the monitor never started it)."""
    topics = catalog_job(job).inputs  # the lag is that of what the job reads
    record = read_record(settings, job)
    managed = record is not None and not record.stopped
    running = record is not None and managed and is_alive(record)
    latest = latest_report(settings, job)
    last_batch = last_batch_report(settings, job, latest)
    ends = topic_end_offsets(settings, topics) if last_batch is not None else None
    run = RunFacts(
        running=running,
        managed=managed,
        started_at_ms=None if record is None else record.started_at_ms,
        stopped_at_ms=None if record is None else record.stopped_at_ms,
    )
    health = assess_health(
        job, run, latest, last_batch, ends, topics,
        _now_ms() if now_ms is None else now_ms, load_restarts(settings, job), settings.monitor,
    )
    return health, record


def _state(health: JobHealth) -> str:
    if health.running:
        return "running"
    if health.managed:
        return "down"
    return "external" if health.running_elsewhere else "stopped"


def _status(
    settings: Settings,
    health: JobHealth,
    state: str,
    pid: int | None,
    problems: list[Problem],
    actions: list[str],
    alerts: list[str],
    restarts_in_window: int,
) -> dict[str, Any]:
    return {
        "job": health.job,
        "state": state,
        "pid": pid,
        "healthy": not problems,
        "query_status": health.status,
        "batch_id": health.batch_id,
        "input_rows_per_s": health.input_rows_per_s,
        "processed_rows_per_s": health.processed_rows_per_s,
        "lag": health.lag,
        "watermark": health.watermark,
        "last_report_age_ms": health.last_report_age_ms,
        "restarts_in_window": restarts_in_window,
        "problems": [{"kind": p.kind, "message": p.message} for p in problems],
        "actions": actions,
        "alerts": alerts,
        "log": str(log_path(settings, health.job)),
        "drops": read_totals(progress_dir(settings), health.job),
    }


def job_status(settings: Settings, job: str) -> dict[str, Any]:
    """The job's state and health, without starting, stopping or alerting anything.

    States: running, down (started by the monitor, process gone), stopped (not started, or
    stopped on purpose), external (reporting progress, but not started by the monitor).
    """
    health, record = inspect_job(settings, job)
    pid = record.pid if record is not None and health.running else None
    return _status(settings, health, _state(health), pid, list(health.problems), [], [],
                   health.recent_restarts)


def watch_job(settings: Settings, job: str, run_url: str | None = None) -> dict[str, Any]:
    """One supervision pass over a job: ensure it runs, judge it, alert; returns its status.

    States: running, started (was not running, not crashed), restarted (had crashed),
    down (crashed and not restarted: restart loop, or the start itself failed), external.
    """
    with job_lock(settings, catalog_job(job).name):
        now_ms = _now_ms()
        health, record = inspect_job(settings, job, now_ms)
        state = _state(health)
        pid = record.pid if record is not None and health.running else None
        problems = list(health.problems)
        actions: list[str] = []
        restarted = False
        restarts_in_window = health.recent_restarts
        try:
            if health.needs_restart:
                if health.running:
                    stop_job(settings, job)
                    actions.append(f"stopped the failed process {pid}")
                pid = start_job_process(settings, job).pid
                restarts_in_window = len(record_restart(settings, job, now_ms))
                actions.append(f"restarted from its checkpoint as pid {pid}")
                state, restarted = "restarted", True
            elif state == "stopped":
                pid = start_job_process(settings, job).pid
                actions.append(f"started as pid {pid}")
                state = "started"
        except Exception as exc:  # spark-submit missing, disk full...: report, don't raise
            log.exception("could not start %s", job)
            problems = [p for p in problems if p.kind != DOWN]
            problems.append(Problem(DOWN, f"could not start: {exc}"))
            actions.append(f"start failed: {exc}")
            state, pid = "down", None
        alerts = send_job_alerts(
            settings, job, problems, restarted, actions, now_ms, run_url,
            details={"pid": pid, "state": state, "lag": health.lag,
                     "exception": health.exception, "log": str(log_path(settings, job))},
        )
    status = _status(settings, health, state, pid, problems, actions, alerts,
                     restarts_in_window)
    (log.warning if problems else log.info)("%s", describe(status))
    return status


def watch_all_jobs(settings: Settings, run_url: str | None = None) -> list[dict[str, Any]]:
    """`watch_job` for every deployed streaming job (`monitor.jobs`), in pipeline order."""
    return [watch_job(settings, job, run_url) for job in settings.monitor.jobs]


def all_job_statuses(settings: Settings) -> list[dict[str, Any]]:
    """`job_status` for every deployed streaming job, in pipeline order."""
    return [job_status(settings, job) for job in settings.monitor.jobs]
