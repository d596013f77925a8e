"""`tideline cluster start|stop|status|history`: a Spark standalone cluster on this machine."""

from __future__ import annotations

import argparse

from spark_jobs.config.cli_args import positive_int
from spark_jobs.settings import Settings


def cmd_start(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.cluster.standalone import start_cluster

    status = start_cluster(settings.cluster, workers=args.workers)
    print("\n".join(status.lines()))
    print(f"jobs use it with TIDELINE_SPARK__MASTER={settings.cluster.master_url}")
    return 0


def cmd_stop(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.cluster.standalone import stop_cluster

    stopped = stop_cluster(settings.cluster)
    print(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running")
    return 0


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.cluster.standalone import cluster_status

    status = cluster_status(settings.cluster)
    print("\n".join(status.lines()))
    return 0 if status.up else 1


def cmd_history(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.cluster.standalone import start_history
    from spark_jobs.streaming.settings import event_log_dir

    start_history(settings.cluster, event_log_dir(settings.lake))
    print(f"history server {settings.cluster.history_ui} over {event_log_dir(settings.lake)}")
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    """Add `tideline cluster ...`."""
    cluster = commands.add_parser(
        "cluster", help="a Spark standalone cluster on this machine (master, workers, history)",
        description="Start, stop or inspect a Spark standalone cluster on 127.0.0.1 (section "
                    "cluster: workers, worker_cores, worker_memory, ports, home). Example: "
                    "`tideline cluster start --workers 2`, then run jobs with "
                    "TIDELINE_SPARK__MASTER=spark://127.0.0.1:7077.",
        examples=("tideline cluster start --workers 2", "tideline cluster status"))
    actions = cluster.add_subparsers(dest="action", required=True, metavar="ACTION")
    reads = ("cluster.*", "lake.root")  # cluster.home defaults under lake.root
    start = actions.add_parser(
        "start", help="start the master and the workers",
        description="Start the master and the workers as daemons of their own; they outlive "
                    "this command until `tideline cluster stop`.",
        examples=("tideline cluster start --workers 2",), reads=reads)
    start.add_argument("--workers", type=positive_int, default=None,
                       help="workers to start (default: cluster.workers)")
    start.set_defaults(func=cmd_start)
    actions.add_parser(
        "stop", help="stop every daemon `cluster start` started",
        description="Stop the master, workers and history server that `cluster start` and "
                    "`cluster history` started (their pid files are under cluster.home).",
        examples=("tideline cluster stop",), reads=reads).set_defaults(func=cmd_stop)
    actions.add_parser(
        "status", help="the master's view: workers, applications (exit 1 if no master answers)",
        description="Print the master's view: its workers and applications; exit 1 if no "
                    "master answers.",
        examples=("tideline cluster status",), reads=reads).set_defaults(func=cmd_status)
    actions.add_parser(
        "history", help="start Spark's history server over the event logs",
        description="Start Spark's history server over the event logs of the jobs and daily "
                    "recomputations (<lake.root>/_spark_events).",
        examples=("tideline cluster history",), reads=reads).set_defaults(func=cmd_history)
