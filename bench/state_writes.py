"""Bytes a streaming query writes to its state per micro-batch, from its checkpoint folder.

Spark's state stores write each version as new files under `<checkpoint>/state/<operator>/`
(RocksDB: the SST files its flushes and compactions made since the last version, a
changelog or a snapshot zip, the metadata); files are never rewritten, old versions are
deleted by maintenance. So the files that appeared (or changed size) since the last look are
what the state wrote meanwhile. Read after each batch's sink call (the state is committed by
then), per operator id; background uploads land in the next look.
"""

from __future__ import annotations

import os
from pathlib import Path


def local_path(uri: str) -> Path:
    """A checkpoint folder on the local file system (`file:` URIs included)."""
    return Path(uri.removeprefix("file://").removeprefix("file:"))


class StateWrites:
    """Bytes of new state files per operator since the previous `take()`."""

    def __init__(self, checkpoint: str) -> None:
        self.root = local_path(checkpoint) / "state"
        self.seen: dict[str, int] = {}

    def take(self) -> dict[str, int]:
        """{operator id: bytes of files new or grown since the last call}."""
        written: dict[str, int] = {}
        if not self.root.is_dir():
            return written
        for folder, _, files in os.walk(self.root):
            operator = Path(folder).relative_to(self.root).parts[:1]
            for name in files:
                path = os.path.join(folder, name)
                try:
                    size = os.path.getsize(path)
                except OSError:  # deleted by maintenance meanwhile
                    continue
                if self.seen.get(path) != size:
                    self.seen[path] = size
                    key = operator[0] if operator else "."
                    written[key] = written.get(key, 0) + size
        return written
