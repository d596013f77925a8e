"""An EngineHost in a process of its own, driven over a socket by the driver's sink.

The driver's Python runs one core; with the rules split over shards, every shard runs here,
one process each, in parallel with each other and with the driver's reading of the next
batch. The process is started by the sink with
the driver's interpreter (`python -m spark_jobs.fraud.jobs.engine_process <fd>`; no fork of a
process that holds a JVM gateway and Kafka clients), receives plain calls (restore, evaluate,
write_changes, maybe_snapshot, close) as pickles and answers each with its result or the
error's text. It exits when told to, or when the driver's end of the socket closes: a killed
driver leaves no engine process behind.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import subprocess
import sys
import traceback
from multiprocessing.connection import Connection
from typing import Any

from spark_jobs.fraud.jobs.engine_host import EngineHost, HostSpec
from spark_jobs.fraud.processors.resident import settle_engine_process_collector

CALLS = frozenset({"restore", "evaluate", "write_changes", "maybe_snapshot"})
LOG = logging.getLogger("tideline.fraud")
STOP_TIMEOUT_S = 130.0  # a snapshot in flight gets 120 s to finish (BackgroundSnapshots.close)
EXIT_TIMEOUT_S = 5.0  # for a process that has answered its last call to exit


class EngineProcessError(RuntimeError):
    """A shard's engine process failed a call, or died."""


class EngineProcess:
    """The driver's handle on one shard's engine process: `begin` a call, `end` it later, so
    that the driver works on its own shard meanwhile."""

    def __init__(self, spec: HostSpec) -> None:
        self.spec = spec
        ours, theirs = socket.socketpair()
        self._process = subprocess.Popen(
            [sys.executable, "-m", __name__, str(theirs.fileno())],
            pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL)
        theirs.close()
        self._connection = Connection(ours.detach())
        # the process answers its start (its host made, or why not) like any call
        self._pending: str | None = "start"
        self._connection.send(spec)

    def started(self) -> None:
        """Wait until the process has made its host; its error raised, with the cause."""
        if self._pending == "start":
            self.end()

    def begin(self, method: str, *args: Any) -> None:
        self.started()
        if self._pending is not None:
            raise EngineProcessError(f"shard {self.spec.shard}: {self._pending} still running")
        self._pending = method
        self._send((method, args))

    def end(self, timeout_s: float | None = None) -> Any:
        """The answer to the call begun last (an error answer raised)."""
        method = self._pending
        if timeout_s is not None and not self._connection.poll(timeout_s):
            raise EngineProcessError(f"shard {self.spec.shard}: no answer to {method} in "
                                     f"{timeout_s:.0f} s")  # still owed: still pending
        self._pending = None
        try:
            ok, result = self._connection.recv()
        except (EOFError, OSError) as exc:
            raise EngineProcessError(
                f"shard {self.spec.shard}'s engine process died during {method} (exit code "
                f"{self._process.poll()})") from exc
        if not ok:
            raise EngineProcessError(f"shard {self.spec.shard}, {method}: {result}")
        return result

    def call(self, method: str, *args: Any) -> Any:
        self.begin(method, *args)
        return self.end()

    def _send(self, message: Any) -> None:
        try:
            self._connection.send(message)
        except OSError as exc:
            raise EngineProcessError(f"shard {self.spec.shard}'s engine process is gone "
                                     f"(exit code {self._process.poll()})") from exc

    def close(self) -> None:
        """Stop the process: an answer still owed is read first, then `close` lets a snapshot
        in flight finish; a process that does not stop in time is killed."""
        try:
            if self._process.poll() is None and self._pending is not None:
                with contextlib.suppress(EngineProcessError):
                    self.end(STOP_TIMEOUT_S)
            if self._process.poll() is None and self._pending is None:
                self.begin("close")
                self.end(STOP_TIMEOUT_S)
                self._process.wait(STOP_TIMEOUT_S)
        except (EngineProcessError, subprocess.TimeoutExpired):
            pass
        finally:
            try:  # a process that answered its end (or failed its start) is exiting
                self._process.wait(EXIT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._connection.close()


def serve(connection: Connection) -> None:
    """The engine process's loop: one call at a time, until `close` or the driver is gone.
    Ctrl-C and SIGTERM are the driver's to handle (it stops its query, then this process)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        host = EngineHost(connection.recv())
    except Exception:
        with contextlib.suppress(OSError):
            connection.send((False, traceback.format_exc(limit=8)))
        return
    try:
        connection.send((True, None))
    except OSError:  # the driver is gone already
        host.close()
        return
    while True:
        try:
            method, args = connection.recv()
        except EOFError:
            host.close()
            return
        try:
            if method == "close":
                host.close()
                connection.send((True, None))
                return
            if method not in CALLS:
                raise ValueError(f"not a call of an engine host: {method!r}")
            result = getattr(host, method)(*args)
        except Exception:
            connection.send((False, traceback.format_exc(limit=8)))
            continue
        connection.send((True, result))
        after_answer(host, method)


def after_answer(host: EngineHost, method: str) -> None:
    """What a call leaves for after its answer, off the batch's path: a failure is logged
    (the call was answered already; a second answer would put the driver out of step)."""
    try:
        if method == "evaluate":
            settle_engine_process_collector()
        elif method == "write_changes":  # the batch is done here
            host.tidy()
    except Exception:
        LOG.exception("engine process housekeeping after %s failed", method)


if __name__ == "__main__":
    serve(Connection(int(sys.argv[1])))
