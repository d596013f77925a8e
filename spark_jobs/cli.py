"""The `tideline` command line: every entry point of the platform, one subcommand each.

Each package adds its own commands (`<package>/commands.py`); this module only assembles
them and turns bad arguments or configuration into a one-line reason and exit status 2,
before anything starts.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from spark_jobs.config import commands as config_commands
from spark_jobs.config.cli_args import UsageError
from spark_jobs.config.durations import DurationError
from spark_jobs.control import commands as control_commands
from spark_jobs.experiments import commands as experiment_commands
from spark_jobs.fraud import commands as fraud_commands
from spark_jobs.local import commands as local_commands
from spark_jobs.results import commands as results_commands
from spark_jobs.samples import commands as samples_commands
from spark_jobs.settings import ConfigError, load_settings
from spark_jobs.streaming import commands as streaming_commands

COMMAND_GROUPS = (  # the order of `tideline --help`
    local_commands, experiment_commands, streaming_commands, control_commands,
    samples_commands, fraud_commands, results_commands, config_commands,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tideline",
        description="Tideline: real-time experiment analytics on Spark.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in COMMAND_GROUPS:
        group.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        settings = load_settings()
        return int(args.func(args, settings) or 0)
    except (ConfigError, DurationError, UsageError, ValueError, FileNotFoundError) as exc:
        print(f"tideline: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
