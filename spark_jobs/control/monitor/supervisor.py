"""Start and stop streaming jobs as Spark applications of their own, and tell if they run.

A job is launched with spark-submit against the configured master, detached in a session of
its own so it outlives the Airflow task (or CLI call) that started it; its output goes to
`<lake.root>/_logs/<job>.log` and its identity to a pid file (see `pidfile`). It runs with
exactly the supervisor's settings, written to `_run/<job>.settings.yaml`, whatever the
environment of the process that starts it.

A stop sends SIGTERM to the job's Python driver (the runner then stops its query cleanly and
the JVM exits with it), waits `monitor.stop_timeout`, then SIGKILLs whatever is left of the
job's session (the JVM, the driver and PySpark's workers, which sit in process groups of
their own but never leave the session).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import fcntl
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from spark_jobs.catalog import JOB_NAMES
from spark_jobs.catalog import job as catalog_job
from spark_jobs.control.monitor.pidfile import (
    RunRecord,
    identifies,
    read_record,
    runs_command,
    write_record,
)
from spark_jobs.control.monitor.processes import ProcessInfo, read_process, session_members
from spark_jobs.control.monitor.state_files import log_dir, run_dir
from spark_jobs.control.submit import (
    ENTRY_POINT,
    freeze_settings,
    frozen_environment,
    spark_submit_command,
)
from spark_jobs.settings import Settings

log = logging.getLogger(__name__)

LEFTOVER_GRACE_S = 5.0
POLL_S = 0.2
# Processes a job spawns: spark-submit/JVM, the Tideline driver, PySpark's workers.
_JOB_PROCESS_MARKS = ("org.apache.spark", "pyspark", ENTRY_POINT.name)

# Popen objects of the jobs this process started, kept so that exited ones are reaped
# (an unreaped child stays a zombie that still holds its pid).
_children: dict[int, subprocess.Popen[bytes]] = {}
_held_locks = threading.local()


class JobAlreadyRunningError(RuntimeError):
    """The job has a live process already; starting a second one would share a checkpoint."""


def job_signature(job: str) -> tuple[str, ...]:
    """The tail of every command line of the job's processes."""
    return (str(ENTRY_POINT), "job", "run", job)


def log_path(settings: Settings, job: str) -> Path:
    return log_dir(settings) / f"{job}.log"


def settings_path(settings: Settings, job: str) -> Path:
    return run_dir(settings) / f"{job}.settings.yaml"


@contextlib.contextmanager
def job_lock(settings: Settings, job: str) -> Iterator[None]:
    """Serialise decisions about one job across processes (two watch passes must not both
    start it); re-entrant within a thread, so a watch pass may stop and start under it."""
    path = (run_dir(settings) / f"{job}.lock").resolve()
    held: set[Path] = _held_locks.__dict__.setdefault("paths", set())
    if path in held:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        held.add(path)
        try:
            yield
        finally:
            held.discard(path)
            fcntl.flock(handle, fcntl.LOCK_UN)


def _reap(pid: int) -> None:
    child = _children.get(pid)
    if child is not None and child.poll() is not None:
        del _children[pid]


def is_alive(record: RunRecord) -> bool:
    """True when the record's process still runs (and is that process, not a pid reuse).

    While a process execs (spark-submit's scripts exec one another, then java), /proc shows
    an empty command line for a moment; that reads as "not our job", so it is read again."""
    _reap(record.pid)
    process = read_process(record.pid)
    deadline = time.monotonic() + EXEC_SETTLE_S
    while (process is not None and process.alive and not process.cmdline
           and time.monotonic() < deadline):
        time.sleep(0.01)
        process = read_process(record.pid)
    return identifies(record, process)


EXEC_SETTLE_S = 1.0


def running_record(settings: Settings, job: str) -> RunRecord | None:
    """The job's pid file when its process is alive, else None."""
    record = read_record(settings, catalog_job(job).name)
    return record if record is not None and not record.stopped and is_alive(record) else None


def is_running(settings: Settings, job: str) -> bool:
    return running_record(settings, job) is not None


def _job_environment(settings: Settings, job: str) -> dict[str, str]:
    """spark-submit's environment, with our settings as the only Tideline configuration."""
    return frozen_environment(freeze_settings(settings, settings_path(settings, job)))


def start_job_process(settings: Settings, job: str) -> RunRecord:
    """Launch the job with spark-submit, detached; returns its pid-file record.

    The job resumes from its checkpoint, so a start after a crash is a restart. Call it
    under `job_lock` (or use `launch_job`).
    """
    catalog_job(job)
    previous = read_record(settings, job)
    if previous is not None:
        if is_alive(previous):
            raise JobAlreadyRunningError(f"{job} is already running as pid {previous.pid}")
        _kill_leftovers(previous, leader_identified=False)
    command = tuple(spark_submit_command(settings, ["job", "run", job], app_name=f"tideline-{job}"))
    env = _job_environment(settings, job)
    log = log_path(settings, job)
    log.parent.mkdir(parents=True, exist_ok=True)
    started_at_ms = int(time.time() * 1000)
    with log.open("ab") as out:
        stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        out.write(f"\n=== {stamp} tideline monitor starts: {' '.join(command)}\n".encode())
        out.flush()
        child = subprocess.Popen(
            command, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True,
        )
    _children[child.pid] = child
    process = _after_exec(child.pid, job_signature(job))
    record = RunRecord(
        job=job,
        pid=child.pid,
        create_time=process.create_time if process is not None else None,
        started_at_ms=started_at_ms,
        command=command,
        signature=job_signature(job),
        log=str(log),
    )
    write_record(settings, record)
    return record


def _after_exec(pid: int, signature: tuple[str, ...], timeout_s: float = 10.0
                ) -> ProcessInfo | None:
    """The child once it runs spark-submit (until its exec, /proc shows our own command
    line, and the job would look not running); None or the last view if it exits first."""
    deadline = time.monotonic() + timeout_s
    process = read_process(pid)
    while (process is not None and process.alive and time.monotonic() < deadline
           and not runs_command(process.cmdline, signature)):
        time.sleep(0.01)
        process = read_process(pid)
    return process


def launch_job(settings: Settings, job: str) -> RunRecord:
    """Start the job unless it runs; JobAlreadyRunningError names the running pid."""
    with job_lock(settings, catalog_job(job).name):
        return start_job_process(settings, job)


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signum)


def _request_stop(record: RunRecord) -> None:
    """SIGTERM the Python driver(s), which stop the query cleanly; the leader if none yet."""
    drivers = [
        p.pid for p in session_members(record.pid)
        if p.alive and p.pid != record.pid and runs_command(p.cmdline, record.signature)
    ]
    for pid in drivers or [record.pid]:
        _signal(pid, signal.SIGTERM)


def _looks_like_job(process: ProcessInfo) -> bool:
    return any(mark in part for part in process.cmdline for mark in _JOB_PROCESS_MARKS)


def _kill_leftovers(record: RunRecord, leader_identified: bool) -> None:
    """SIGKILL what is left of the job's session and wait until it is gone.

    While the leader was identified the whole session is the job's; once it is gone its pid
    (the session id) could in principle be reused by a new session, so only processes that
    look like the job's are killed then.
    """
    deadline = time.monotonic() + LEFTOVER_GRACE_S
    while True:
        _reap(record.pid)
        left = [
            p for p in session_members(record.pid)
            if p.alive and (leader_identified or _looks_like_job(p))
        ]
        if not left or time.monotonic() > deadline:
            return
        for process in left:
            _signal(process.pid, signal.SIGKILL)
        time.sleep(POLL_S)


def _stop_unlocked(settings: Settings, records: Sequence[RunRecord]) -> list[str]:
    alive = [r for r in records if is_alive(r)]
    for record in alive:
        _request_stop(record)
    started = time.monotonic()
    timeout_s = settings.monitor.stop_timeout_ms / 1000
    while any(is_alive(r) for r in alive) and time.monotonic() - started < timeout_s:
        time.sleep(POLL_S)
    for record in alive:
        if is_alive(record):
            log.warning("%s (pid %d) did not stop within %.0f s: killing it", record.job,
                        record.pid, timeout_s)
        else:
            log.info("%s (pid %d) stopped cleanly", record.job, record.pid)
    stopped_at_ms = int(time.time() * 1000)
    for record in records:
        _kill_leftovers(record, leader_identified=record in alive)
        if not record.stopped:
            write_record(settings, dataclasses.replace(record, stopped_at_ms=stopped_at_ms))
    return [r.job for r in alive]


def stop_jobs(settings: Settings, jobs: Sequence[str]) -> list[str]:
    """Stop the jobs together (one shared stop_timeout); returns those that were running.

    The pid files record the stop, so a watch pass sees the jobs as stopped, not crashed.
    """
    names = sorted({catalog_job(job).name for job in jobs})
    with contextlib.ExitStack() as locks:
        for job in names:  # always in name order: two stoppers cannot deadlock
            locks.enter_context(job_lock(settings, job))
        records = [r for r in (read_record(settings, job) for job in names) if r is not None]
        return _stop_unlocked(settings, records)


def stop_job(settings: Settings, job: str) -> bool:
    """Stop one job; True when it was running."""
    return bool(stop_jobs(settings, [job]))


def stop_all_jobs(settings: Settings) -> list[str]:
    """Stop every streaming job (the platform command calls this at Ctrl-C)."""
    return stop_jobs(settings, JOB_NAMES)
