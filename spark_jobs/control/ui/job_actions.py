"""What the jobs page's buttons do, with the monitor's own commands: watch (one supervision
pass, as `tideline jobs watch`), restart (a graceful stop and a start from the checkpoint,
under the job's lock so a watch pass cannot interleave) and stop (as `tideline jobs stop`)."""

from __future__ import annotations

from collections.abc import Callable

from spark_jobs.settings import Settings


def watch(settings: Settings, job: str) -> str:
    from spark_jobs.control.monitor.summary import describe
    from spark_jobs.control.monitor.watch import watch_job

    return describe(watch_job(settings, job))


def restart(settings: Settings, job: str) -> str:
    from spark_jobs.control.monitor.restarts import clear_restarts
    from spark_jobs.control.monitor.supervisor import job_lock, start_job_process, stop_job

    with job_lock(settings, job):
        was_running = stop_job(settings, job)
        record = start_job_process(settings, job)
    clear_restarts(settings, job)  # restarted by a person: an old restart loop is forgiven
    stopped = "stopped and " if was_running else ""
    return f"{job}: {stopped}started from its checkpoint as pid {record.pid}"


def stop(settings: Settings, job: str) -> str:
    from spark_jobs.control.monitor.supervisor import stop_job

    return f"{job}: {'stopped' if stop_job(settings, job) else 'was not running'}"


ACTIONS: dict[str, Callable[[Settings, str], str]] = {
    "watch": watch, "restart": restart, "stop": stop,
}
