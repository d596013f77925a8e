"""Durable state of a driver-side engine in the query's checkpoint folder: one change file per
micro-batch and, now and then, a snapshot.

`<checkpoint>/engine/changes-<batch>` holds what batch <batch> changed, written before its
outputs are committed; `snapshot-<batch>` the whole state after <batch>. With the rules split
over several engines (`fraud.shards`), shard 0 keeps `engine/` and shard i `engine-<i>/`, and
`engine/shards` records how many there are. State after batch N
is the newest snapshot at or below N plus the change files above it up to N. A snapshot is
only taken of a batch Spark has already committed, and older files are pruned only after it
is written, so a batch Spark replays always finds the state it started from. Files are written
to a temporary name and renamed, so a crash never leaves half a file under a final name.
"""

from __future__ import annotations

import contextlib
import os

import pyarrow.fs as pafs

FOLDER = "engine"
CHANGES, SNAPSHOT = "changes-", "snapshot-"


class StateFilesError(RuntimeError):
    """The engine's state files are inconsistent (a change file is missing)."""


SHARDS_FILE = "shards"


def folder_of(shard: int) -> str:
    """The folder of shard `shard`'s files (shard 0: the single engine's folder of old)."""
    return FOLDER if shard == 0 else f"{FOLDER}-{shard}"


def checkpoint_folder(checkpoint: str, folder: str) -> tuple[pafs.FileSystem, str]:
    """The file system of a checkpoint (local or remote) and the path of `folder` in it."""
    location = checkpoint if "://" in checkpoint else "file://" + os.path.abspath(checkpoint)
    filesystem, path = pafs.FileSystem.from_uri(location)
    return filesystem, f"{path.rstrip('/')}/{folder}"


class EngineStateFiles:
    """Change files and snapshots of one engine (one shard) of a query."""

    def __init__(self, checkpoint: str, shard: int = 0) -> None:
        self.filesystem, self.folder = checkpoint_folder(checkpoint, folder_of(shard))
        self.filesystem.create_dir(self.folder, recursive=True)

    def pin_shards(self, shards: int) -> None:
        """Record the number of shards in a new checkpoint; fail on one split differently,
        whose rules and windows live in the other shards' files (the driver calls it before it
        starts the engines, and shard 0's host again)."""
        path = f"{self.folder}/{SHARDS_FILE}"
        if self.filesystem.get_file_info(path).type == pafs.FileType.NotFound:
            recorded = 1 if self._batches(CHANGES) or self._batches(SNAPSHOT) else None
            if recorded is None:
                self._write(SHARDS_FILE, str(shards).encode())
                return
        else:
            recorded = int(self._read(SHARDS_FILE).decode())
        if recorded != shards:
            raise StateFilesError(
                f"the engine state under {self.folder} is split over {recorded} shard(s) but "
                f"fraud.shards is {shards}: set fraud.shards to {recorded}, or delete the "
                "job's checkpoint to start it afresh with the new split"
            )

    @property
    def local_folder(self) -> str | None:
        """The folder as a local path, when the checkpoint is on the local file system."""
        return self.folder if isinstance(self.filesystem, pafs.LocalFileSystem) else None

    def _temporary(self, name: str) -> str:
        return f"{self.folder}/.{name}.tmp"

    def _write(self, name: str, data: bytes) -> None:
        temporary = self._temporary(name)
        with self.filesystem.open_output_stream(temporary) as out:
            out.write(data)
        self.filesystem.move(temporary, f"{self.folder}/{name}")

    def _read(self, name: str) -> bytes:
        with self.filesystem.open_input_stream(f"{self.folder}/{name}") as stream:
            return stream.read()

    def _batches(self, prefix: str, infos: list[pafs.FileInfo] | None = None) -> list[int]:
        """The batches of the files named `prefix` + batch, from a listing of the folder."""
        if infos is None:
            infos = self.filesystem.get_file_info(pafs.FileSelector(self.folder))
        return sorted(int(i.base_name[len(prefix):]) for i in infos
                      if i.base_name.startswith(prefix) and i.base_name[len(prefix):].isdigit())

    def write_changes(self, batch_id: int, changes: bytes) -> None:
        self._write(f"{CHANGES}{batch_id}", changes)

    def write_snapshot(self, batch_id: int, snapshot: bytes) -> None:
        """Store the state after `batch_id` (a committed batch), then drop what it replaces."""
        self._write(f"{SNAPSHOT}{batch_id}", snapshot)
        self.delete(self.replaced_by(batch_id))

    def snapshot_temporary(self, batch_id: int, writer: int) -> str:
        """Where process `writer` writes a snapshot first (see background_snapshots): a name
        of its own, so two writers of one batch (an orphan of a killed driver and the
        restarted one) never write into the same file."""
        return self._temporary(f"{SNAPSHOT}{batch_id}.{writer}")

    def publish_snapshot(self, batch_id: int, writer: int) -> None:
        """Give the snapshot process `writer` wrote its name; what it replaces stays until its
        owner deletes it (`replaced_by`, `delete`)."""
        final = f"{self.folder}/{SNAPSHOT}{batch_id}"
        self.filesystem.move(self.snapshot_temporary(batch_id, writer), final)

    def replaced_by(self, batch_id: int) -> list[str]:
        """The files the snapshot of `batch_id` replaces, oldest first: older snapshots, the
        change files up to it, and what failed or orphaned snapshot writers left (none is
        writing while a snapshot is published, and a later writer's file has a new name)."""
        infos = self.filesystem.get_file_info(pafs.FileSelector(self.folder))  # one listing
        unfinished = [i.path for i in infos if i.base_name.startswith(f".{SNAPSHOT}")
                      and i.base_name.endswith(".tmp")]
        return ([f"{self.folder}/{SNAPSHOT}{old}" for old in self._batches(SNAPSHOT, infos)
                 if old < batch_id]
                + [f"{self.folder}/{CHANGES}{old}" for old in self._batches(CHANGES, infos)
                   if old <= batch_id]
                + unfinished)

    def delete(self, paths: list[str]) -> None:
        """Delete files (those already gone are fine)."""
        for path in paths:
            with contextlib.suppress(FileNotFoundError):
                self.filesystem.delete_file(path)

    def discard_unfinished_snapshots(self) -> None:
        """Remove the temporary files of snapshots never published (their writer failed, or
        its parent was killed): as big as the state, and never read."""
        for info in self.filesystem.get_file_info(pafs.FileSelector(self.folder)):
            if info.base_name.startswith(f".{SNAPSHOT}") and info.base_name.endswith(".tmp"):
                self.filesystem.delete_file(info.path)

    def snapshot_size(self, batch_id: int) -> int:
        """The bytes of the snapshot of `batch_id`."""
        return self.filesystem.get_file_info(f"{self.folder}/{SNAPSHOT}{batch_id}").size

    def discard_snapshot(self, batch_id: int, writer: int) -> None:
        """Remove what a failed snapshot writer left, if anything."""
        temporary = self.snapshot_temporary(batch_id, writer)
        if self.filesystem.get_file_info(temporary).type != pafs.FileType.NotFound:
            self.filesystem.delete_file(temporary)

    def state_after(self, batch_id: int) -> tuple[bytes | None, list[bytes], int | None]:
        """(snapshot, change files in order, the snapshot's batch) making up the state after
        `batch_id` (-1: before the first batch)."""
        snapshots = [b for b in self._batches(SNAPSHOT) if b <= batch_id]
        base = snapshots[-1] if snapshots else None
        start = -1 if base is None else base
        available = set(self._batches(CHANGES))
        wanted = range(start + 1, batch_id + 1)
        missing = [b for b in wanted if b not in available]
        if missing:
            raise StateFilesError(
                f"engine state under {self.folder}: change files of batches {missing[:5]} are "
                f"missing; delete the job's checkpoint to start it afresh"
            )
        snapshot = None if base is None else self._read(f"{SNAPSHOT}{base}")
        return snapshot, [self._read(f"{CHANGES}{b}") for b in wanted], base
