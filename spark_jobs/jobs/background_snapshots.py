"""Engine snapshots taken in a forked child, so a micro-batch never waits for one.

A snapshot pickles the whole engine state: ~1 s for 350k windows (60,000 transactions of the
benchmark traffic), a stall of the driver's sink, and so of every alert, each
`fraud.snapshot_every` batches. `os.fork()` (~7 ms for a 400 MB driver) gives a child a
copy-on-write image of the state as it is at that moment; the child pickles it and writes
the snapshot's temporary file while the parent goes on with the next batches. The parent
gives the file its name and prunes what it replaces once the child has exited cleanly
(polled between batches), exactly as an in-process snapshot would have been published.

The child only runs pure Python over the engine's plain data and writes one local file with
`os.write`, then leaves with `os._exit`: it touches no lock, socket or library thread of the
parent (the Kafka producer, py4j, Arrow). Checkpoints that are not on the local file system
take the snapshot in process, as before.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable

from spark_jobs.jobs.engine_state_files import EngineStateFiles

LOG = logging.getLogger("tideline.fraud")


def _write_in_child(path: str, take: Callable[[], bytes]) -> None:
    """The child's whole life: never returns."""
    code = 1
    try:
        data = take()
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(descriptor, view):]
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        code = 0
    finally:
        os._exit(code)


class BackgroundSnapshots:
    """At most one snapshot in flight; `poll()` publishes it once its child is done."""

    def __init__(self, files: EngineStateFiles) -> None:
        self.files = files
        self._child: int | None = None
        self._batch: int | None = None

    @property
    def in_flight(self) -> int | None:
        """The batch whose snapshot is being written, if any."""
        return self._batch

    def start(self, batch_id: int, take: Callable[[], bytes]) -> None:
        """Snapshot the state after `batch_id` (a committed batch) as `take()` returns it."""
        if self._batch is not None:
            raise RuntimeError(f"the snapshot of batch {self._batch} is still being written")
        if self.files.local_folder is None:
            self.files.write_snapshot(batch_id, take())
            return
        path = self.files.snapshot_temporary(batch_id)
        pid = os.fork()
        if pid == 0:
            _write_in_child(path, take)
        self._child, self._batch = pid, batch_id

    def poll(self, wait: bool = False) -> int | None:
        """Publish the snapshot in flight if its child has finished; the batch it published,
        or None (none in flight, still running, or failed: logged, a later one retries)."""
        if self._child is None or self._batch is None:
            return None
        pid, status = os.waitpid(self._child, 0 if wait else os.WNOHANG)
        if pid == 0:
            return None
        batch = self._batch
        self._child = self._batch = None
        if os.waitstatus_to_exitcode(status) != 0:
            LOG.warning("the engine snapshot of batch %s failed (exit status %s); the change "
                        "files stay and a later snapshot replaces them", batch, status)
            self.files.discard_snapshot(batch)
            return None
        self.files.publish_snapshot(batch)
        return batch

    def close(self, timeout_s: float = 120.0) -> None:
        """Wait for a snapshot in flight (published if it succeeds); kill it after timeout_s."""
        deadline = time.monotonic() + timeout_s
        while self._child is not None and time.monotonic() < deadline:
            self.poll()
            if self._child is not None:
                time.sleep(0.05)
        if self._child is not None:
            os.kill(self._child, signal.SIGKILL)
            self.poll(wait=True)
