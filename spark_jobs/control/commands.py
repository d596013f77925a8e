"""`tideline jobs status|start|stop|watch`: deploy and watch the streaming jobs."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from spark_jobs.catalog import JOB_NAMES
from spark_jobs.catalog import job as catalog_job
from spark_jobs.settings import Settings


def _streaming_jobs(names: Sequence[str], settings: Settings) -> list[str]:
    """The named streaming jobs (checked), or the deployed ones (`monitor.jobs`) when none is
    named."""
    return [catalog_job(name).name for name in names] or list(settings.monitor.jobs)


def cmd_jobs_status(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.control.monitor import job_status, render_summary

    jobs = _streaming_jobs(args.names, settings)
    print(render_summary([job_status(settings, job) for job in jobs]))
    return 0


def cmd_jobs_start(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.control.monitor.restarts import clear_restarts
    from spark_jobs.control.monitor.supervisor import JobAlreadyRunningError, launch_job

    for job in _streaming_jobs(args.names, settings):
        try:
            record = launch_job(settings, job)
        except JobAlreadyRunningError as exc:
            print(exc)
            continue
        clear_restarts(settings, job)  # started by hand: an old restart loop is forgiven
        print(f"{job}: started as pid {record.pid}; log {record.log}")
    return 0


def cmd_jobs_stop(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.control.monitor.supervisor import stop_jobs

    jobs = _streaming_jobs(args.names, settings)
    stopped = stop_jobs(settings, jobs)
    for job in jobs:
        print(f"{job}: {'stopped' if job in stopped else 'was not running'}")
    return 0


def cmd_jobs_watch(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.control.monitor import render_summary, watch_job

    statuses = [watch_job(settings, job) for job in _streaming_jobs(args.names, settings)]
    print(render_summary(statuses))
    return 0 if all(status["healthy"] for status in statuses) else 1


def register(commands: argparse._SubParsersAction) -> None:
    """Add `tideline jobs` to `tideline`."""
    jobs = commands.add_parser(
        "jobs", help="deploy and watch the streaming jobs (spark-submit)",
        description="Deploy and watch the streaming jobs, each as its own Spark application.",
        examples=("tideline jobs status", "tideline jobs start filter_events"))
    jobs_commands = jobs.add_subparsers(dest="action", required=True, metavar="ACTION")
    watched = ("monitor.*", "lake.root", "lake.checkpoints", "kafka.bootstrap", "kafka.client")
    for action, func, text, reads in (
        ("status", cmd_jobs_status, "state, rows/s, lag, watermark and problems of each job",
         watched),
        ("start", cmd_jobs_start, "start jobs as their own Spark applications", ("*",)),
        ("stop", cmd_jobs_stop, "stop jobs cleanly (the streaming_jobs DAG restarts them "
                                "unless it is paused)", ("monitor.*", "lake.root")),
        ("watch", cmd_jobs_watch, "one watch pass: start or restart, judge, alert; "
                                  "exit 1 if a job is unhealthy", ("*",)),
    ):
        jobs_action = jobs_commands.add_parser(
            action, help=text, description=f"{text[0].upper()}{text[1:]} (default: the jobs "
            "of monitor.jobs). A started job reads the whole configuration.",
            examples=(f"tideline jobs {action}", f"tideline jobs {action} fraud_rules"),
            reads=reads)
        jobs_action.add_argument("names", nargs="*", metavar="NAME",
                                 help=f"{', '.join(JOB_NAMES)} (default: monitor.jobs)")
        jobs_action.set_defaults(func=func)
