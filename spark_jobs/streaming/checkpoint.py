"""What a foreachBatch sink reads from its query's checkpoint.

- The watermark of a batch: Spark writes it into the offset log entry before running the
  batch, so the sink sees the exact value the stateful operators used, also on a replay.
- The query id, stable across restarts of one checkpoint and new for a new checkpoint: the
  sinks put it in their Delta app-transaction id, so a deleted checkpoint starts a new
  lineage instead of having its batches skipped as "already committed".
"""

from __future__ import annotations

import json
import os

import pyarrow.fs as pafs


def _read(checkpoint: str, name: str) -> str:
    location = checkpoint if "://" in checkpoint else "file://" + os.path.abspath(checkpoint)
    filesystem, path = pafs.FileSystem.from_uri(location)
    with filesystem.open_input_stream(f"{path.rstrip('/')}/{name}") as stream:
        return stream.read().decode("utf-8")


def batch_watermark_ms(checkpoint: str, batch_id: int) -> int:
    """The event-time watermark Spark used for `batch_id`, from the checkpoint's offset log."""
    lines = _read(checkpoint, f"offsets/{batch_id}").splitlines()
    if len(lines) < 2:
        raise RuntimeError(f"offset log entry {batch_id} under {checkpoint} is incomplete")
    return int(json.loads(lines[1]).get("batchWatermarkMs", 0))


def batch_end_offsets(checkpoint: str, batch_id: int) -> list[dict[str, int]]:
    """Each source's end offsets of `batch_id` as its offset log entry recorded them (the
    source's own JSON, in the query's source order; {} for a source without offsets)."""
    lines = _read(checkpoint, f"offsets/{batch_id}").splitlines()[2:]
    return [json.loads(line) if line.startswith("{") else {} for line in lines]


def query_id(checkpoint: str) -> str:
    """The id Spark gave the query when this checkpoint was created."""
    return str(json.loads(_read(checkpoint, "metadata"))["id"])


def recorded_conf(checkpoint: str, name: str) -> str | None:
    """A SQL setting as the checkpoint pinned it (Spark restores e.g. the shuffle width from
    the offset log, overriding the session); None when the query has not run a batch yet."""
    location = checkpoint if "://" in checkpoint else "file://" + os.path.abspath(checkpoint)
    filesystem, path = pafs.FileSystem.from_uri(location)
    selector = pafs.FileSelector(f"{path.rstrip('/')}/offsets", allow_not_found=True)
    ids = [int(info.base_name) for info in filesystem.get_file_info(selector)
           if info.base_name.isdigit()]
    if not ids:
        return None
    lines = _read(checkpoint, f"offsets/{max(ids)}").splitlines()
    conf = json.loads(lines[1]).get("conf", {}) if len(lines) > 1 else {}
    value = conf.get(name)
    return None if value is None else str(value)


def last_committed_batch(checkpoint: str) -> int | None:
    """The newest batch id in the checkpoint's commit log (None: nothing committed yet)."""
    location = checkpoint if "://" in checkpoint else "file://" + os.path.abspath(checkpoint)
    filesystem, path = pafs.FileSystem.from_uri(location)
    selector = pafs.FileSelector(f"{path.rstrip('/')}/commits", allow_not_found=True)
    ids = [int(info.base_name) for info in filesystem.get_file_info(selector)
           if info.base_name.isdigit()]
    return max(ids, default=None)


def committed_watermark_ms(checkpoint: str) -> int | None:
    """The watermark of the newest committed batch: every window ending at or before it is
    final in the query's output. None when the query never committed a batch."""
    batch = last_committed_batch(checkpoint)
    return None if batch is None else batch_watermark_ms(checkpoint, batch)


def created_at_ms(checkpoint: str) -> int | None:
    """When the query of this checkpoint was created (its metadata file's modification time,
    epoch ms): the start of the checkpoint lineage. None when there is no checkpoint."""
    location = checkpoint if "://" in checkpoint else "file://" + os.path.abspath(checkpoint)
    filesystem, path = pafs.FileSystem.from_uri(location)
    info = filesystem.get_file_info(f"{path.rstrip('/')}/metadata")
    if info.type != pafs.FileType.File or info.mtime is None:
        return None
    return int(info.mtime.timestamp() * 1000)
