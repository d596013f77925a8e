"""Command-line values every command parses alike: times, dates, rule files, run ids.

A wrong value raises UsageError (or argparse.ArgumentTypeError) whose message says what to
write instead; `tideline` turns it into one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
from datetime import UTC, date, datetime


class UsageError(ValueError):
    """A wrong argument; the message says what to write instead."""


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
