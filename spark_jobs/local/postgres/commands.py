"""`tideline postgres start|stop|status`: the private PostgreSQL cluster on this machine."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from spark_jobs.settings import Settings

if TYPE_CHECKING:
    from spark_jobs.local.postgres.server import PostgresStatus


def _print_status(status: PostgresStatus) -> None:
    print("\n".join(status.lines()))


def cmd_start(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.local.postgres.server import start_postgres

    status = start_postgres(settings.postgres)
    _print_status(status)
    print("use it with TIDELINE_METADATA__URL='{}' TIDELINE_AIRFLOW__DATABASE='{}'".format(
        status.urls["metadata.url"], status.urls["airflow.database"]))
    return 0


def cmd_stop(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.local.postgres.server import stop_postgres

    print("stopped" if stop_postgres(settings.postgres) else "nothing was running")
    return 0


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.local.postgres.server import postgres_status

    status = postgres_status(settings.postgres)
    _print_status(status)
    return 0 if status.up else 1


def register(commands: argparse._SubParsersAction) -> None:
    """Add `tideline postgres ...`."""
    postgres = commands.add_parser(
        "postgres", help="a private PostgreSQL for the experiment metadata and Airflow's DB",
        description="Start, stop or inspect a private PostgreSQL cluster on 127.0.0.1 from the "
                    "machine's PostgreSQL (Debian's postgresql package; section postgres: port, "
                    "home, user, databases). `start` prints the URLs to set as metadata.url and "
                    "airflow.database; SQLite stays the default.",
        examples=("tideline postgres start", "tideline postgres status"))
    actions = postgres.add_subparsers(dest="action", required=True, metavar="ACTION")
    reads = ("postgres.*", "lake.root")  # postgres.home defaults under lake.root
    actions.add_parser(
        "start", help="initialise once, start, create the role and databases",
        description="Initialise the cluster once, start it on 127.0.0.1, create the role and "
                    "its two databases (idempotent) and print the URLs to use.",
        examples=("tideline postgres start",), reads=reads).set_defaults(func=cmd_start)
    actions.add_parser(
        "stop", help="stop the server (its data stays in postgres.home)",
        description="Stop the server (pg_ctl stop -m fast); its data stays in postgres.home.",
        examples=("tideline postgres stop",), reads=reads).set_defaults(func=cmd_stop)
    actions.add_parser(
        "status", help="whether it runs, and its URLs (exit 1 if not running)",
        description="Whether the server runs (PostgreSQL's own pid file) and its URLs; exit 1 "
                    "if it does not.",
        examples=("tideline postgres status",), reads=reads).set_defaults(func=cmd_status)
