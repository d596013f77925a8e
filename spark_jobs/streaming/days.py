"""UTC days in epoch milliseconds, as every system's daily check cuts them, and times as
people read them in those checks' messages."""

from __future__ import annotations

import datetime

DAY_MS = 86_400_000


def day_bounds_ms(day: datetime.date) -> tuple[int, int]:
    """(day 00:00 UTC, next day 00:00 UTC) in epoch ms; a day owns the window ends in
    (start, end], so the window ending at midnight belongs to the day before."""
    start = datetime.datetime.combine(day, datetime.time(), tzinfo=datetime.UTC)
    start_ms = int(start.timestamp() * 1000)
    return start_ms, start_ms + DAY_MS


def iso_ms(ms: int | None) -> str:
    """An epoch-ms time as ISO 8601 UTC text ("never" for None)."""
    if ms is None:
        return "never"
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).isoformat()
