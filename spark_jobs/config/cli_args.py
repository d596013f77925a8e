"""Command-line values every command parses alike: times, dates, counts, ports, run ids.

A wrong value raises UsageError (or argparse.ArgumentTypeError) whose message says what to
write instead; `tideline` turns it into one line on stderr and exit status 2. The argparse
types below reject a value before the command starts anything.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime
from typing import Any, NoReturn

from spark_jobs.config.cli_help import LinesHelpFormatter, command_epilog
from spark_jobs.config.durations import DurationError, parse_duration_ms

ERROR_PREFIX = "tideline: error: "


class UsageError(ValueError):
    """A wrong argument; the message says what to write instead."""


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (`tideline: error: <command>: <reason>`)
    instead of the usage text and the reason; `--help` still shows the usage.

    Every command (`add_parser` passes these on) also takes `examples=` (command lines) and
    `reads=` (the config keys it reads: `section.key`, `section.*`, or `*` for all), shown in
    its `--help` after the description (config.cli_help)."""

    def __init__(self, *args: Any, examples: Sequence[str] = (), reads: Sequence[str] = (),
                 **kwargs: Any) -> None:
        self.examples, self.reads = tuple(examples), tuple(reads)
        kwargs["epilog"] = command_epilog(kwargs.get("epilog"), self.examples, self.reads)
        kwargs.setdefault("formatter_class", LinesHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        command = self.prog.partition(" ")[2]
        where = f"{command}: " if command else ""
        self.exit(2, f"{ERROR_PREFIX}{where}{one_line(message)} (see {self.prog} --help)\n")


def one_line(message: str) -> str:
    """A message on one line: its lines joined, blanks collapsed."""
    return " ".join(message.split())


def _number_type(convert: Callable[[str], float], noun: str,
                 accepts: Callable[[float], bool]) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {noun}: {text!r}") from None
        if not math.isfinite(value) or not accepts(value):
            raise argparse.ArgumentTypeError(f"must be {noun}, got {text!r}")
        return value

    return parse


positive_int = _number_type(int, "a positive integer", lambda v: v > 0)
non_negative_int = _number_type(int, "an integer >= 0", lambda v: v >= 0)
positive_number = _number_type(float, "a positive number", lambda v: v > 0)
port_number = _number_type(int, "a port number (1-65535)", lambda v: 0 < v < 65536)


def duration_ms(text: str) -> int:
    """argparse type of a duration (`90s`, `15m`, `PT15M`, `0`) -> milliseconds."""
    try:
        return parse_duration_ms(text)
    except DurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def time_ms(text: str) -> int:
    """argparse type of a time (ISO 8601 or epoch ms) -> epoch milliseconds."""
    try:
        return parse_time_ms(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def print_error(message: str) -> None:
    """The one line every failure of `tideline` prints on stderr."""
    print(f"{ERROR_PREFIX}{one_line(message)}", file=sys.stderr)


def parse_time_ms(text: str) -> int:
    """ISO 8601 (naive means UTC) or epoch milliseconds."""
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"not a time: {text!r} (use ISO 8601 like 2026-01-01T00:00:00Z)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def parse_date(text: str) -> date:
    """A calendar day like 2026-01-01 (argparse type: a bad value exits 2 with the reason)."""
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date: {text!r} (use YYYY-MM-DD)") from None


def manual_run_id(given: str | None) -> str:
    """The run id stored with results: the given one, else manual__<now> (as Airflow's)."""
    return given or f"manual__{datetime.now(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}"


def add_day_arguments(command: argparse.ArgumentParser, run_url: bool = False) -> None:
    """--date (required) and --run-id, as every daily check takes them."""
    command.add_argument("--date", type=parse_date, required=True, help="YYYY-MM-DD (UTC)")
    command.add_argument("--run-id", help="id stored with the results (default: manual__<now>)")
    if run_url:
        command.add_argument("--run-url", help="link stored with the results and alerts")
