"""`tideline job run NAME`: one streaming job of the catalog in this process."""

from __future__ import annotations

import argparse

from spark_jobs.catalog import JOB_NAMES, job
from spark_jobs.settings import Settings


def cmd_job_run(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.streaming.runner import run_job

    job(args.name)
    run_job(settings, args.name, available_now=args.available_now)
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    """Add `tideline job run` to `tideline`."""
    job_parser = commands.add_parser(
        "job", help="streaming jobs", description="Run one streaming job in this process.",
        examples=("tideline job run filter_events",))
    job_commands = job_parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    run = job_commands.add_parser(
        "run", help="run a streaming job",
        description="Run one streaming job of the catalog in this process until Ctrl-C (or, "
                    "with --available-now, until the topics are drained). Its system's "
                    "section (experiments, fraud or samples) is read by its own jobs only.",
        examples=("tideline job run experiment_metrics",
                  "tideline job run fraud_rules --available-now"),
        reads=("kafka.*", "spark.*", "lake.*", "jobs.*", "metadata.url", "experiments.*",
               "fraud.*", "samples.*"))
    run.add_argument("name", help=", ".join(JOB_NAMES))
    run.add_argument("--available-now", action="store_true",
                     help="process what is in the topics, close the windows, and stop")
    run.set_defaults(func=cmd_job_run)
