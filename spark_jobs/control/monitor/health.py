"""Is a streaming job healthy? A pure judgement from its process, its reports and the clock.

Problems, each with the alert kind it raises:
- `down`: the monitor started it (pid file) and its process is gone;
- `failed`: its query ended with an exception (the runner then exits non-zero);
- `stale`: no report for `monitor.stale_after` while it has input waiting (a job that has
  read everything writes only an `idle` heartbeat every 10 s, no progress event);
- `lagging`: more than `monitor.max_lag` records of its topics not yet read;
- `restart_loop`: it died again after `monitor.restart_limit` restarts within
  `monitor.restart_window`, so it is left down until the window moves on or a person acts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from spark_jobs.control.monitor.lag import TopicEnds, offsets_lag
from spark_jobs.control.monitor.restarts import recent_restarts, restart_budget_spent
from spark_jobs.settings import MonitorSettings

DOWN, FAILED, STALE, LAGGING, RESTART_LOOP = "down", "failed", "stale", "lagging", "restart_loop"
ACTIVE_STATUSES = ("started", "running", "idle")


@dataclass(frozen=True)
class RunFacts:
    """What the supervisor knows of the job's process. `managed`: the monitor started the job
    and nobody stopped it on purpose since (`stopped_at_ms`, the last deliberate stop)."""

    running: bool
    managed: bool
    started_at_ms: int | None = None
    stopped_at_ms: int | None = None


@dataclass(frozen=True)
class Problem:
    kind: str
    message: str
    metric: str | None = None
    observed: float | None = None
    threshold: float | None = None


@dataclass(frozen=True)
class JobHealth:
    job: str
    running: bool
    managed: bool
    status: str | None
    last_report_ms: int | None
    last_report_age_ms: int | None
    batch_id: int | None
    input_rows_per_s: float | None
    processed_rows_per_s: float | None
    lag: int | None
    watermark: str | None
    exception: str | None
    recent_restarts: int
    running_elsewhere: bool
    problems: tuple[Problem, ...]

    def has(self, kind: str) -> bool:
        return any(p.kind == kind for p in self.problems)

    @property
    def healthy(self) -> bool:
        return not self.problems

    @property
    def needs_restart(self) -> bool:
        """Down or failed, and the restart budget is not spent."""
        return (self.has(DOWN) or self.has(FAILED)) and not self.has(RESTART_LOOP)


def _number(report: Mapping[str, Any] | None, key: str) -> float | None:
    value = None if report is None else report.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _first_line(text: Any) -> str | None:
    if not text:
        return None
    lines = str(text).strip().splitlines()
    return lines[0][:300] if lines else None


def _age_text(ms: int) -> str:
    return f"{ms / 1000:.0f} s" if ms < 120_000 else f"{ms / 60_000:.1f} min"


def assess_health(
    job: str,
    run: RunFacts,
    latest: Mapping[str, Any] | None,
    last_batch: Mapping[str, Any] | None,
    ends: TopicEnds | None,
    topics: Sequence[str],
    now_ms: int,
    restarts_ms: Sequence[int],
    monitor: MonitorSettings,
) -> JobHealth:
    """Judge one job. `latest` is its latest report, `last_batch` its newest batch report,
    `ends` the end offsets of its topics (None if Kafka could not tell)."""
    reported_ms = _number(latest, "reported_at_ms")
    last_report_ms = int(reported_ms) if reported_ms is not None else None
    status = None if latest is None else latest.get("status")
    # The latest report speaks for the current (or last) process only if written after it
    # started; before its first report, a fresh process inherits its predecessor's file.
    of_this_run = (
        latest is not None
        and last_report_ms is not None
        and (run.started_at_ms is None or last_report_ms >= run.started_at_ms)
    )
    lag = offsets_lag(last_batch, ends, topics)
    recent = recent_restarts(restarts_ms, now_ms, monitor.restart_window_ms)
    exception = _first_line(latest.get("exception")) if latest and of_this_run else None
    problems: list[Problem] = []

    # A failure counts for a process that is (or was, until it died) the monitor's; a failed
    # report of an unmanaged job is history, e.g. from a manual run.
    failed = of_this_run and status == "failed" and (run.managed or run.running)
    if failed:
        problems.append(Problem(FAILED, f"query failed: {exception or 'no message'}"))
    elif run.managed and not run.running:
        problems.append(Problem(DOWN, "process is gone"))
    crashed = failed or (run.managed and not run.running)
    limit, window_ms = monitor.restart_limit, monitor.restart_window_ms
    if crashed and restart_budget_spent(restarts_ms, now_ms, limit, window_ms):
        problems.append(Problem(
            RESTART_LOOP,
            f"crashed again after {len(recent)} restarts within {_age_text(window_ms)}; "
            "not restarting",
            metric="restarts", observed=len(recent), threshold=limit,
        ))
    if run.running:
        since = last_report_ms if of_this_run else run.started_at_ms
        silent_ms = None if since is None else now_ms - since
        if silent_ms is not None and silent_ms > monitor.stale_after_ms and lag != 0:
            waiting = "input waiting" if lag else "lag unknown"
            problems.append(Problem(
                STALE, f"no progress for {_age_text(silent_ms)} with {waiting}",
                metric="progress_age_ms", observed=silent_ms, threshold=monitor.stale_after_ms,
            ))
        if lag is not None and lag > monitor.max_lag:
            problems.append(Problem(
                LAGGING, f"{lag} records behind (limit {monitor.max_lag})",
                metric="lag_records", observed=lag, threshold=monitor.max_lag,
            ))

    event_time = (last_batch or {}).get("eventTime") or {}
    batch_id = _number(last_batch, "batchId")
    return JobHealth(
        job=job,
        running=run.running,
        managed=run.managed,
        status=status if isinstance(status, str) else None,
        last_report_ms=last_report_ms,
        last_report_age_ms=None if last_report_ms is None else now_ms - last_report_ms,
        batch_id=None if batch_id is None else int(batch_id),
        input_rows_per_s=_number(last_batch, "inputRowsPerSecond"),
        processed_rows_per_s=_number(last_batch, "processedRowsPerSecond"),
        lag=lag,
        watermark=event_time.get("watermark") if isinstance(event_time, dict) else None,
        exception=exception,
        recent_restarts=len(recent),
        running_elsewhere=(
            not run.managed
            and status in ACTIVE_STATUSES
            and last_report_ms is not None
            and now_ms - last_report_ms < monitor.stale_after_ms
            # a stopped query does not always get to report it: older reports are ours
            and (run.stopped_at_ms is None or last_report_ms > run.stopped_at_ms)
        ),
        problems=tuple(problems),
    )
