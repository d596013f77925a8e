"""Engine snapshots taken in a forked child, so a micro-batch never waits for one.

A snapshot pickles the whole engine state, which takes far longer than a batch at the
benchmark's state size: a stall of the driver's sink, and so of every alert, at every
snapshot (BENCHMARKS.md, issue 5). `os.fork()`, cheap even for a large
driver, gives a child a copy-on-write image of the state as it is at that moment; the child
pickles it and writes a temporary file of its own while the parent goes on with the next
batches. The parent gives the file its name once the child has exited cleanly (polled
between batches), exactly as an in-process snapshot would have been published, and deletes
what it replaces later, TIDIED_PER_BATCH files at a time, in `tidy()`, which its owner calls
once a batch is done: the thousands of change files a snapshot replaces took 16-75 ms to
delete on an idle machine (500-2,500 files), 50-100 ms in the batch that published it in a
live run, and 330 ms for the batch after when all were deleted after its predecessor.

The child runs only pure Python over the engine's plain data and writes one local file with
`os.write`, then leaves with `os._exit`. It must touch no lock, socket or library thread of
the parent (the Kafka producer, py4j, Arrow), so the cyclic garbage collector is off while
it lives (a collection would run py4j finalizers, which take a lock another thread may have
held at the fork), it takes the default signal handlers, and it offers itself first to the
kernel's out-of-memory killer (copy-on-write can double the memory for a moment), and it runs
at the lowest CPU priority, so that it takes little CPU from the batches on a busy machine
(a slower snapshot, which the change files cover meanwhile). A child
that outlives CHILD_TIMEOUT_S is killed; a failed snapshot is logged and retried later.
Checkpoints that are not on the local file system take the snapshot in process.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import signal
import time
from collections.abc import Callable

from spark_jobs.fraud.jobs.engine_state_files import EngineStateFiles

LOG = logging.getLogger("tideline.fraud")
CHILD_TIMEOUT_S = 600.0
SNAPSHOT_NICENESS = 19  # added to the child's niceness: the smallest share of a busy CPU
TIDIED_PER_BATCH = 100  # files a published snapshot replaces, deleted per batch (~3-10 ms)


def _write_in_child(path: str, take: Callable[[], bytes]) -> None:
    """The child's whole life: never returns."""
    code = 1
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        try:  # first to go if memory runs out (psutil has no call for this)
            with open("/proc/self/oom_score_adj", "w") as adjust:
                adjust.write("1000")
        except OSError:
            pass
        # the lowest CPU priority: pickling the whole state took a core for a second or more,
        # and on a busy machine every alert of those batches waited for it (BENCHMARKS.md).
        # An optimisation only: a system refusing it must not stop snapshots.
        with contextlib.suppress(OSError):
            os.nice(SNAPSHOT_NICENESS)
        data = take()
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
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
        self._started = 0.0
        self.size = 0  # bytes of the newest snapshot written (set by its owner after a restore)
        self._replaced: list[str] = []  # files published snapshots replace, still to delete

    @property
    def in_flight(self) -> int | None:
        """The batch whose snapshot is being written, if any."""
        return self._batch

    def start(self, batch_id: int, take: Callable[[], bytes]) -> None:
        """Snapshot the state after `batch_id` (a committed batch) as `take()` returns it.
        A failure to start is logged: the change files stay and a later snapshot retries."""
        if self._batch is not None:
            raise RuntimeError(f"the snapshot of batch {self._batch} is still being written")
        if self.files.local_folder is None:
            data = take()
            self.files.write_snapshot(batch_id, data)
            self.size = len(data)
            return
        collecting = gc.isenabled()
        gc.disable()  # the child inherits it off; see the module docstring
        try:
            pid = os.fork()
        except OSError as exc:
            if collecting:
                gc.enable()
            LOG.warning("cannot fork to snapshot batch %s (%s); retried later", batch_id, exc)
            return
        if pid == 0:
            _write_in_child(self.files.snapshot_temporary(batch_id, os.getpid()), take)
        if collecting:
            gc.enable()
        self._child, self._batch, self._started = pid, batch_id, time.monotonic()

    def poll(self, wait: bool = False) -> int | None:
        """Publish the snapshot in flight if its child has finished; the batch it published,
        or None (none in flight, still running, or failed: logged, a later one retries)."""
        child, batch = self._child, self._batch
        if child is None or batch is None:
            return None
        if not wait and time.monotonic() - self._started > CHILD_TIMEOUT_S:
            LOG.warning("the engine snapshot of batch %s took over %.0f s: killed", batch,
                        CHILD_TIMEOUT_S)
            os.kill(child, signal.SIGKILL)
            wait = True
        pid, status = os.waitpid(child, 0 if wait else os.WNOHANG)
        if pid == 0:
            return None
        self._child = self._batch = None
        try:
            if os.waitstatus_to_exitcode(status) != 0:
                LOG.warning("the engine snapshot of batch %s failed (exit status %s); the "
                            "change files stay and a later snapshot replaces them", batch,
                            status)
                self.files.discard_snapshot(batch, child)
                return None
            self.files.publish_snapshot(batch, child)
            self.size = self.files.snapshot_size(batch)
        except OSError as exc:
            LOG.warning("the engine snapshot of batch %s could not be published (%s); the "
                        "change files stay and a later snapshot replaces them", batch, exc)
            return None
        try:
            self._replaced.extend(self.files.replaced_by(batch))
        except OSError as exc:  # left on disk: never read, and listed again by the next one
            LOG.warning("the files the engine snapshot of batch %s replaces could not be "
                        "listed (%s)", batch, exc)
        return batch

    def tidy(self, files: int | None = None) -> None:
        """Delete up to `files` (TIDIED_PER_BATCH) of those the published snapshots replace,
        oldest first. They are never read again (EngineStateFiles.state_after starts at the
        newest snapshot), so this waits for moments off the batches' path, a few at a time."""
        count = TIDIED_PER_BATCH if files is None else files
        doomed, self._replaced = self._replaced[:count], self._replaced[count:]
        try:
            self.files.delete(doomed)
        except OSError as exc:  # left on disk: never read, and harmless
            LOG.warning("files a published engine snapshot replaces could not be deleted (%s)",
                        exc)

    def close(self, timeout_s: float = 120.0) -> None:
        """Wait for a snapshot in flight (published if it succeeds; kill it after
        timeout_s), then tidy."""
        deadline = time.monotonic() + timeout_s
        while self._child is not None and time.monotonic() < deadline:
            self.poll()
            if self._child is not None:
                time.sleep(0.05)
        if self._child is not None:
            os.kill(self._child, signal.SIGKILL)
            self.poll(wait=True)
        self.tidy(len(self._replaced))
