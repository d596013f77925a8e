"""Milestones of a run's start-up and shutdown, logged at INFO with their epoch time.

`tideline -v job run ...` (or `recompute`) then shows where a run's fixed cost goes, and
bench/startup.py reads these lines to split a run's wall time into phases.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable
from typing import Any

log = logging.getLogger("spark_jobs.timing")


def mark(name: str, phase: str) -> None:
    """`timing <name> <phase> <epoch seconds>`: one milestone of the run called name."""
    log.info("timing %s %s %.3f", name, phase, time.time())


def batches(name: str, progresses: Iterable[Any]) -> None:
    """`timing <name> batch <json>` per retained progress of a query that ended: its start,
    rows and durationMs (the progress file may miss the last ones: its listener events
    arrive late, after a short run has exited)."""
    if not log.isEnabledFor(logging.INFO):
        return
    for progress in progresses:
        fields = json.loads(progress.json)
        summary = {k: fields.get(k) for k in ("batchId", "timestamp", "numInputRows",
                                              "durationMs")}
        log.info("timing %s batch %s", name, json.dumps(summary, separators=(",", ":")))
