"""The progress reports a job's ProgressFileListener wrote (see `spark_jobs.streaming.progress`).

`<job>.json` holds the latest report: a batch's StreamingQueryProgress, or only a status
(`started`, `stopped`, `failed`) when the query started or ended. Lag, rows/s and watermark
come from the latest report that describes a batch, which after a stop is in the history.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from spark_jobs.settings import Settings
from spark_jobs.streaming.progress import progress_dir, read_progress

HISTORY_TAIL_BYTES = 256 << 10


def latest_report(settings: Settings, job: str) -> dict[str, Any] | None:
    """The job's latest report, or None when it never reported."""
    report = read_progress(settings, job)
    return report if isinstance(report, dict) else None


def describes_batch(report: Mapping[str, Any] | None) -> bool:
    return report is not None and "batchId" in report and "sources" in report


def last_batch_report(
    settings: Settings, job: str, latest: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """The newest report of a batch: `latest` itself, else the newest one in the history."""
    if describes_batch(latest):
        return dict(latest)  # type: ignore[arg-type]
    path = progress_dir(settings) / f"{job}.jsonl"
    try:
        with path.open("rb") as history:
            history.seek(0, 2)
            size = history.tell()
            history.seek(max(0, size - HISTORY_TAIL_BYTES))
            tail = history.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    for line in reversed(tail.splitlines()):
        try:
            report = json.loads(line)
        except ValueError:
            continue  # the first line of the tail may be cut
        if isinstance(report, dict) and describes_batch(report):
            return report
    return None
