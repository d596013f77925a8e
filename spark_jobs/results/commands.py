"""`tideline dashboard`: the experiment results page."""

from __future__ import annotations

import argparse

from spark_jobs.config.cli_args import UsageError, port_number
from spark_jobs.settings import Settings


def cmd_dashboard(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.results.dashboard.server import DashboardStartError, serve_forever

    try:
        serve_forever(settings, port=args.port)
    except DashboardStartError as exc:
        raise UsageError(str(exc)) from None
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    """Add `tideline dashboard` to `tideline`."""
    dashboard = commands.add_parser(
        "dashboard", help="experiment results dashboard on 127.0.0.1 (verdicts, lift, bands)",
        description="Serve the experiment results page (verdicts, lift, confidence bands) "
                    "on dashboard.host until Ctrl-C.",
        examples=("tideline dashboard", "tideline dashboard --port 8051"),
        reads=("dashboard.*", "stats.*", "lake.root", "metadata.url", "experiments.period",
               "experiments.window", "experiments.critical_event_types"),
    )
    dashboard.add_argument("--port", type=port_number, help="port (default: dashboard.port, 8050)")
    dashboard.set_defaults(func=cmd_dashboard)
