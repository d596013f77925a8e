"""Restart history of a job, so that a job that keeps dying is not restarted forever.

`<lake.root>/_run/<job>.restarts.json` lists the times (epoch ms) the monitor restarted the
job after a crash; entries older than `monitor.restart_window` are dropped when it is written.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path

from spark_jobs.control.monitor.state_files import read_json, run_dir, write_json
from spark_jobs.settings import Settings


def recent_restarts(times_ms: Sequence[int], now_ms: int, window_ms: int) -> list[int]:
    """The restarts within the window ending now (a restart exactly window_ms ago is out)."""
    return sorted(t for t in times_ms if now_ms - window_ms < t <= now_ms)


def restart_budget_spent(
    times_ms: Sequence[int], now_ms: int, limit: int, window_ms: int
) -> bool:
    """True when one more restart would make more than `limit` within the window."""
    return len(recent_restarts(times_ms, now_ms, window_ms)) >= limit


def restarts_path(settings: Settings, job: str) -> Path:
    return run_dir(settings) / f"{job}.restarts.json"


def load_restarts(settings: Settings, job: str) -> list[int]:
    value = read_json(restarts_path(settings, job))
    if not isinstance(value, list):
        return []
    return [int(t) for t in value if isinstance(t, int | float) and not isinstance(t, bool)]


def record_restart(settings: Settings, job: str, now_ms: int) -> list[int]:
    """Add a restart at now_ms; returns the restarts within the window, now included."""
    kept = recent_restarts(
        [*load_restarts(settings, job), now_ms], now_ms, settings.monitor.restart_window_ms
    )
    write_json(restarts_path(settings, job), kept)
    return kept


def clear_restarts(settings: Settings, job: str) -> None:
    """Forget the history (a person started the job by hand: the loop is theirs to judge)."""
    with contextlib.suppress(FileNotFoundError):
        restarts_path(settings, job).unlink()
