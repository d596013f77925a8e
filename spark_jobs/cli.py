"""The `tideline` command line: every entry point of the platform, one subcommand each.

Each package adds its own commands (`<package>/commands.py`); this module only assembles
them and turns every failure into one line on stderr: bad arguments or configuration exit 2
before anything starts, a failure while running exits 1. `TIDELINE_DEBUG=1` shows the
traceback of a failure while running instead. `tideline --version` names PySpark's and
Python's versions too, which a bug report needs.
"""

from __future__ import annotations

import logging
import os
import platform
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from spark_jobs.catalog import UnknownJobError
from spark_jobs.cluster import commands as cluster_commands
from spark_jobs.config import commands as config_commands
from spark_jobs.config.cli_args import OneLineParser, UsageError, print_error
from spark_jobs.config.durations import DurationError
from spark_jobs.config.layers import CONFIG_VARIABLE, ENV_PREFIX
from spark_jobs.control import commands as control_commands
from spark_jobs.experiments import commands as experiment_commands
from spark_jobs.fraud import commands as fraud_commands
from spark_jobs.local import commands as local_commands
from spark_jobs.local.postgres import commands as postgres_commands
from spark_jobs.results import commands as results_commands
from spark_jobs.samples import commands as samples_commands
from spark_jobs.settings import ConfigError, load_settings
from spark_jobs.streaming import commands as streaming_commands

COMMAND_GROUPS = (  # the order of `tideline --help`
    local_commands, cluster_commands, postgres_commands, experiment_commands, streaming_commands,
    control_commands,
    samples_commands, fraud_commands, results_commands, config_commands,
)
DEBUG_VARIABLE = "TIDELINE_DEBUG"  # 1: a failure while running shows its traceback
BAD_INPUT = (ConfigError, DurationError, UsageError, UnknownJobError)  # exit 2
USAGE_EXIT = 2
FAILED_EXIT = 1
CONFIGURATION_HELP = (
    f"configuration: defaults < the YAML file named by {CONFIG_VARIABLE} < environment "
    f"variables {ENV_PREFIX}<SECTION>__<KEY> (e.g. {ENV_PREFIX}KAFKA__BOOTSTRAP="
    "127.0.0.1:19092); `tideline config show` prints every key, its value and where it came "
    "from, and each command's --help the keys it reads."
)


def installed_version(distribution: str) -> str:
    try:
        return version(distribution)
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def version_line() -> str:
    """`tideline X (PySpark Y, Python Z)`: what a bug report needs first."""
    return (f"tideline {installed_version('tideline')} (PySpark {installed_version('pyspark')}, "
            f"Python {platform.python_version()})")


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="tideline",
        description="Tideline: real-time experiment analytics on Spark.",
        examples=("tideline platform", "tideline COMMAND --help"),
        epilog=f"{CONFIGURATION_HELP}\n\n{DEBUG_VARIABLE}=1 shows the traceback of a failure.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    parser.add_argument("--version", action="version", version=version_line())
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in COMMAND_GROUPS:
        group.register(commands)
    return parser


def failure_line(exc: BaseException) -> str:
    """What a failure while running says: its type and the first line of its message."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


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
    except BAD_INPUT as exc:
        print_error(str(exc))
        return USAGE_EXIT
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if os.environ.get(DEBUG_VARIABLE, "").strip().lower() in ("1", "true", "yes"):
            raise
        print_error(failure_line(exc))
        return FAILED_EXIT


if __name__ == "__main__":
    sys.exit(main())
