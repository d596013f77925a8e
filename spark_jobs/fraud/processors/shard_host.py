"""A process per shard on each executor that keeps the shard's engine between micro-batches.

Spark hands a shard's task to whichever of the executor's Python workers is idle, so a
copy of the engine kept in a worker (the earlier design) was behind at about every other
batch and had to replay the batch the other worker had written first: 25-35 % of the
workers' time in spark mode (BENCHMARKS.md, twentieth session). The engine now lives in a
process of its own, one per (query state, shard) and executor, which every worker of that
executor talks to over a Unix socket (shard_host_client.py): the copy is the stored
version at every batch unless the shard moved to another executor or a batch failed.

Spark state stays the truth. The worker reads it and tells the host what its copy needs
(shard_load.Load); the host evaluates the batch and hands back the outputs and the change
log, which the worker writes to Spark state; only then does the worker tag the copy with
the version written. A copy whose batch was never committed (the task failed after
evaluating) is left untagged and rebuilt next time.

The host exits within ANCHOR_CHECK_S once the process that started its worker (the
executor's Python daemon, or the executor itself) is gone, also while a task holds it,
after IDLE_EXIT_S without a call, on SIGTERM, or when its socket's name was taken over by a
newer host (shard_host_client.py starts one only where none answers).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import time
import traceback
from collections import namedtuple
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import psutil

from spark_jobs.fraud.core.changelog import LoggedStore
from spark_jobs.fraud.core.engine import FraudEngine
from spark_jobs.fraud.core.isolation import apply_message
from spark_jobs.fraud.core.output_rows import arrival_order, output_values
from spark_jobs.fraud.processors.resident import (
    raise_young_threshold,
    settle_engine_process_collector,
)
from spark_jobs.fraud.processors.shard_load import OWN, Load, Version, apply_load
from spark_jobs.streaming.future_rows import FUTURE_COLUMN

IDLE_EXIT_S = 600.0  # a host without calls this long exits (its query stopped or moved)
ANCHOR_CHECK_S = 1.0  # how often the host looks for the process it lives for
INPUT_FIELDS = ("kind", "value", "kafka_topic", "kafka_partition", "kafka_offset",
                "kafka_timestamp", "kafka_key", FUTURE_COLUMN)
InputRecord = namedtuple("InputRecord", INPUT_FIELDS)


@dataclass(frozen=True)
class EngineSpec:
    """The engine settings of a shard (plain data: sent by the worker at each connection)."""

    alert_on_late: bool
    bucket_ms: int
    late_retention_ms: int
    max_message_bytes: int


def input_records(columns: list[list[Any]]) -> list[Any]:
    """The batch's rows from their columns (INPUT_FIELDS order), in arrival order."""
    return sorted(map(InputRecord._make, zip(*columns, strict=True)), key=arrival_order)


class ShardHost:
    """One shard's engine and the version of its state; the calls a worker makes."""

    CALLS = frozenset({"version", "load", "evaluate", "cleanup", "snapshot", "tag",
                       "stats"})

    def __init__(self, spec: EngineSpec) -> None:
        self.spec = spec
        self.store: LoggedStore | None = None
        self.engine: FraudEngine | None = None
        # the stored version the copy is; None: no copy, one ahead of every stored version
        # (evaluated, not yet tagged), or one a load changed without finishing
        self._version: Version | None = None
        self.counts = {"hits": 0, "caught_up": 0, "rebuilt": 0, "batches": 0}
        raise_young_threshold()

    def version(self) -> Version | None:
        return self._version if self.engine is not None else None

    def load(self, load: Load) -> None:
        """Make the copy the stored state at `load.target` (ShardState.load_plan said how).
        The version is forgotten first: a replay changes the copy in place, and one that
        fails or is abandoned half way must not leave the old version on a changed copy."""
        copy = self.store if self.engine is not None else None
        self._version = None
        store, replayed = apply_load(load, copy)
        if replayed is None or self.engine is None:
            self.counts["rebuilt"] += 1
            spec = self.spec
            self.engine = FraudEngine(store, spec.alert_on_late, spec.bucket_ms,
                                      late_retention_ms=spec.late_retention_ms,
                                      max_message_bytes=spec.max_message_bytes)
        elif load.kind == OWN:
            self.counts["hits"] += 1
        else:  # brought forward: also logs that put no window (a rule change) are read again
            self.counts["caught_up"] += 1
            self.engine.caught_up(replayed)
        self.store = store
        self._version = load.target

    def evaluate(self, version: Version, shard: int, columns: list[list[Any]],
                 watermark_ms: int, now_ms: int
                 ) -> tuple[list[tuple[Any, ...]], bytes, int | None]:
        """The batch's outputs (output_values tuples), its change log and the engine's next
        clean-up time, on the copy at `version` (the stored head the worker loaded it for).
        The copy is ahead of every stored version until `tag`."""
        engine, store = self._at(version)
        self.counts["batches"] += 1
        out = [output_values(shard, output, row)
               for row in input_records(columns)
               for output in apply_message(engine, row, watermark_ms, now_ms)]
        return out, store.take_changes(), engine.next_cleanup_ms(watermark_ms)

    def cleanup(self, version: Version, watermark_ms: int) -> tuple[bytes, int | None]:
        """The engine's clean-up (its timer fired) on the copy at `version`: the change log
        and the next clean-up time."""
        engine, store = self._at(version)
        engine.cleanup(watermark_ms)
        return store.take_changes(), engine.next_cleanup_ms(watermark_ms)

    def snapshot(self) -> bytes:
        if self.store is None:
            raise RuntimeError("fraud shard host: a snapshot before its state was loaded")
        return self.store.snapshot()

    def tag(self, version: Version) -> None:
        """The batch's changes are stored as `version`: the copy is that version."""
        self._version = version

    def stats(self) -> dict[str, int]:
        return dict(self.counts)

    def _at(self, version: Version) -> tuple[FraudEngine, LoggedStore]:
        """The engine and store, which from here on are ahead of every stored version;
        refused unless the copy is exactly `version` (else a batch would run on a copy
        loaded for another head)."""
        if self.engine is None or self.store is None or self._version != version:
            raise RuntimeError(f"fraud shard host: a batch for state {version} on a copy at "
                               f"{self._version} (load it first)")
        self._version = None
        return self.engine, self.store


def answer(connection: Connection, host: ShardHost, method: str, args: tuple[Any, ...]
           ) -> None:
    """Run one call and send (True, result), or (False, the error's text)."""
    try:
        if method not in ShardHost.CALLS:
            raise ValueError(f"not a call of a fraud shard host: {method!r}")
        result = getattr(host, method)(*args)
    except Exception:
        connection.send((False, traceback.format_exc(limit=8)))
        return
    connection.send((True, result))
    if method == "tag":  # the batch is over: its garbage collected, off its path
        settle_engine_process_collector()


def anchor_alive(anchor: psutil.Process) -> bool:
    """Whether the process the host lives for still runs (not exited, not a zombie; a pid
    the kernel gave to another process since is not it: psutil compares start times)."""
    try:
        return anchor.is_running() and anchor.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


class Listening:
    """The host's socket and the file that names it: the file is the host's only while it
    is the one bound (a newer host may have been started at the same path)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.socket.bind(path)  # fails if a file is there: the starter removed a stale one
        self.socket.listen(4)
        self._identity = self._named()

    def _named(self) -> tuple[int, int] | None:
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            return None
        return info.st_dev, info.st_ino

    def still_named(self) -> bool:
        return self._identity is not None and self._named() == self._identity

    def close(self) -> None:
        """Remove the file if it still names this socket, then close it (a worker that finds
        no file starts a new host)."""
        if self.still_named():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
        self.socket.close()


def serve(listening: Listening, anchor: psutil.Process, idle_exit_s: float = IDLE_EXIT_S
          ) -> None:
    """Serve one connection (one task) at a time until the anchor process is gone, the
    socket's file names another host, or no call came for `idle_exit_s`. The first message
    of a connection is the shard's EngineSpec."""
    host: ShardHost | None = None
    listener = listening.socket
    listener.settimeout(ANCHOR_CHECK_S)
    last_call = time.monotonic()

    def wanted() -> bool:
        return anchor_alive(anchor) and listening.still_named()

    while wanted() and time.monotonic() - last_call < idle_exit_s:
        try:
            accepted, _ = listener.accept()
        except TimeoutError:
            continue
        accepted.settimeout(None)
        connection = Connection(accepted.detach())
        with contextlib.closing(connection), contextlib.suppress(EOFError, OSError):
            while True:
                if not connection.poll(ANCHOR_CHECK_S):
                    if not wanted():
                        return
                    continue
                message = connection.recv()
                if isinstance(message, EngineSpec):  # a connection's first message
                    if host is None or host.spec != message:
                        host = ShardHost(message)  # settings changed with a restart
                    connection.send((True, None))
                elif host is None:
                    connection.send((False, "fraud shard host: a call before the spec"))
                else:
                    answer(connection, host, *message)
                last_call = time.monotonic()
        last_call = time.monotonic()


def _stop(signum: int, frame: Any) -> None:
    raise SystemExit(0)


def main(argv: list[str]) -> None:
    """Bind the socket at argv[0], say so on stdout (the starting worker waits for that
    line), then serve while the process argv[1] (its pid) runs."""
    path, anchor_pid = argv[0], int(argv[1])
    try:
        anchor = psutil.Process(anchor_pid)
    except psutil.NoSuchProcess:
        sys.stderr.write(f"fraud shard host: process {anchor_pid} is gone, not starting\n")
        sys.exit(3)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the Spark application's to stop, not ours
    signal.signal(signal.SIGTERM, _stop)
    listening = Listening(path)
    try:
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no stray print can reach a closed pipe
        os.close(devnull)
        serve(listening, anchor)
    finally:
        listening.close()
