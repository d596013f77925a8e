"""Daily housekeeping of the lake: Delta compaction and vacuum, old snapshots, checkpoints.

Streaming sinks already compact their own tables every few batches; this pass covers every
table (control-plane ones too) and removes what nothing references any more. Each step is
safe while the streaming jobs run: sinks retry a commit that loses to a compaction, vacuum
only deletes files unreferenced for `maintenance.vacuum_retention`, and checkpoint cleanup
only removes stale temp files (Spark trims the logs and state itself, see
`clean_checkpoints`).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from spark_jobs.experiments.admin.snapshot import prune_snapshots
from spark_jobs.settings import Settings
from spark_jobs.streaming.lake.delta import compact, vacuum, with_commit_retries

log = logging.getLogger(__name__)

HOUR_MS = 3_600_000
STALE_TEMP_S = 3600
_TEMP_SUFFIXES = (".tmp", ".tmp.crc")


def _local(uri: str) -> Path | None:
    if uri.startswith("file://"):
        return Path(uri[len("file://") :])
    return None if "://" in uri else Path(uri)


def lake_tables(settings: Settings) -> list[str]:
    """Names of the Delta tables under the lake root (folders holding a `_delta_log`)."""
    root = _local(settings.lake.root)
    if root is None:
        raise ValueError(
            f"lake.root {settings.lake.root!r} is not a local path: list its tables with the "
            "object store's tools and run compaction per table"
        )
    if not root.is_dir():
        return []
    return sorted(p.parent.name for p in root.glob("*/_delta_log") if p.is_dir())


def compact_tables(settings: Settings) -> dict[str, dict[str, Any]]:
    """Compact every table; per table the files added and removed."""
    report = {}
    for name in lake_tables(settings):
        metrics = with_commit_retries(lambda name=name: compact(settings.lake.table(name)))
        report[name] = {k: metrics.get(k) for k in ("numFilesAdded", "numFilesRemoved")}
        log.info("compacted %s: %s", name, report[name])
    return report


def vacuum_tables(settings: Settings) -> dict[str, int]:
    """Vacuum every table with the configured retention; per table the files deleted."""
    hours = -(-settings.maintenance.vacuum_retention_ms // HOUR_MS)  # round up: 30m keeps 1 h
    report = {}
    for name in lake_tables(settings):
        uri = settings.lake.table(name)
        deleted = with_commit_retries(lambda uri=uri: vacuum(uri, retention_hours=hours))
        report[name] = len(deleted)
        log.info("vacuumed %s: %d files deleted (retention %d h)", name, len(deleted), hours)
    return report


def prune_old_snapshots(settings: Settings) -> int:
    """Keep the newest `maintenance.snapshots_kept` ramp snapshots; returns files deleted."""
    removed = prune_snapshots(settings.lake.snapshots, settings.maintenance.snapshots_kept)
    log.info("pruned %d ramp snapshot files", len(removed))
    return len(removed)


def clean_checkpoints(settings: Settings, now_s: float | None = None) -> dict[str, int]:
    """Delete temp files of interrupted checkpoint writes older than an hour, per job the
    number deleted.

    Spark itself deletes offset and commit log entries and state versions older than the
    newest `maintenance.checkpoint_batches_kept` batches (spark.sql.streaming.
    minBatchesToRetain, set by build_session) as batches commit; what it never removes is
    the temp file a write leaves when the driver dies in the middle of it.
    """
    root = _local(settings.lake.checkpoints)
    if root is None or not root.is_dir():
        return {}
    now = time.time() if now_s is None else now_s
    report = {}
    for job in sorted(p for p in root.iterdir() if p.is_dir()):
        deleted = _remove_stale_temps(job, now)
        report[job.name] = deleted
        log.info("checkpoint %s: %d stale temp files deleted", job.name, deleted)
    return report


def _remove_stale_temps(job: Path, now: float) -> int:
    deleted = 0
    for path in job.rglob("*"):
        if path.is_file() and path.name.endswith(_TEMP_SUFFIXES):
            try:
                if now - path.stat().st_mtime > STALE_TEMP_S:
                    path.unlink()
                    deleted += 1
            except FileNotFoundError:
                continue
    return deleted


def run_maintenance(settings: Settings) -> dict[str, Any]:
    """Every step once, in a safe order (compact before vacuum); the report of each."""
    return {
        "compacted": compact_tables(settings),
        "vacuumed": vacuum_tables(settings),
        "snapshots_deleted": prune_old_snapshots(settings),
        "checkpoint_files_deleted": clean_checkpoints(settings),
    }
