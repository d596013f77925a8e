"""A process per shard on each executor that keeps the shard's engine between micro-batches.

Spark hands a shard's task to whichever of the executor's Python workers is idle, so a
copy of the engine kept in a worker (the earlier design) was behind at about every other
batch and had to replay the batch the other worker had written first: 25-35 % of the
workers' time in spark mode (BENCHMARKS.md, twentieth session). The engine now lives in a
process of its own, one per (query state, shard) and executor, which every worker of that
executor talks to over a Unix socket (shard_host_client.py): the copy is the stored
version at every batch unless the shard moved to another executor or a batch failed.

Spark state stays the truth. The worker reads it and tells the host what its copy needs
(shard_state.Load); the host evaluates the batch and hands back the outputs and the change
log, which the worker writes to Spark state; only then does the worker tag the copy with
the version written. A copy whose batch was never committed (the task failed after
evaluating) is left untagged and rebuilt next time.

The host exits when the process that started its worker (the executor's Python daemon, or
the executor itself) is gone, or after IDLE_EXIT_S without a call: it never outlives the
Spark application that made it.
"""

from __future__ import annotations

import contextlib
import logging
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

from spark_jobs.fraud.core.engine import FraudEngine
from spark_jobs.fraud.core.isolation import apply_message
from spark_jobs.fraud.core.output_rows import arrival_order, output_values
from spark_jobs.fraud.processors.resident import (
    raise_young_threshold,
    settle_engine_process_collector,
)
from spark_jobs.fraud.processors.shard_state import Load, Version, apply_load
from spark_jobs.streaming.future_rows import FUTURE_COLUMN

LOG = logging.getLogger("tideline.fraud")
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
        self.store: Any = None
        self.engine: FraudEngine | None = None
        self._version: Version | None = None  # None: no copy, or one ahead of its state
        self.counts = {"hits": 0, "caught_up": 0, "rebuilt": 0, "batches": 0}
        raise_young_threshold()

    def version(self) -> Version | None:
        return self._version if self.engine is not None else None

    def load(self, load: Load) -> None:
        """Make the copy the stored state (ShardState.load_plan said how)."""
        store, replayed = apply_load(load, self.store)
        if replayed is None or self.engine is None:
            self.counts["rebuilt"] += 1
            spec = self.spec
            self.engine = FraudEngine(store, spec.alert_on_late, spec.bucket_ms,
                                      late_retention_ms=spec.late_retention_ms,
                                      max_message_bytes=spec.max_message_bytes)
        elif replayed:
            self.counts["caught_up"] += 1
            self.engine.caught_up(replayed)
        else:
            self.counts["hits"] += 1
        self.store = store

    def evaluate(self, shard: int, columns: list[list[Any]], watermark_ms: int,
                 now_ms: int) -> tuple[list[tuple[Any, ...]], bytes, int | None]:
        """The batch's outputs (output_fields rows, as tuples), its change log and the
        engine's next clean-up time. The copy is ahead of every stored version until `tag`."""
        engine = self._engine()
        self._version = None
        self.counts["batches"] += 1
        out = [output_values(shard, output, row)
               for row in input_records(columns)
               for output in apply_message(engine, row, watermark_ms, now_ms)]
        return out, self.store.take_changes(), engine.next_cleanup_ms(watermark_ms)

    def cleanup(self, watermark_ms: int) -> tuple[bytes, int | None]:
        """The engine's clean-up (its timer fired): the change log and the next time."""
        engine = self._engine()
        self._version = None
        engine.cleanup(watermark_ms)
        return self.store.take_changes(), engine.next_cleanup_ms(watermark_ms)

    def snapshot(self) -> bytes:
        return self.store.snapshot()

    def tag(self, version: Version) -> None:
        """The batch's changes are stored as `version`: the copy is that version."""
        self._version = version

    def stats(self) -> dict[str, int]:
        return dict(self.counts)

    def _engine(self) -> FraudEngine:
        if self.engine is None:
            raise RuntimeError("fraud shard host: a batch before its state was loaded")
        return self.engine


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


def serve(listener: socket.socket, anchor: psutil.Process, idle_exit_s: float = IDLE_EXIT_S
          ) -> None:
    """Serve one connection (one task) at a time until the anchor process is gone or no call
    came for `idle_exit_s`. The first message of a connection is the shard's EngineSpec."""
    host: ShardHost | None = None
    listener.settimeout(ANCHOR_CHECK_S)
    last_call = time.monotonic()
    while anchor_alive(anchor) and time.monotonic() - last_call < idle_exit_s:
        try:
            accepted, _ = listener.accept()
        except TimeoutError:
            continue
        accepted.settimeout(None)
        connection = Connection(accepted.detach())
        with contextlib.closing(connection), contextlib.suppress(EOFError, OSError):
            spec = connection.recv()
            if host is None or host.spec != spec:
                host = ShardHost(spec)  # settings changed with a restart: a new engine
            connection.send((True, None))
            while True:
                method, args = connection.recv()
                answer(connection, host, method, args)
                last_call = time.monotonic()
        last_call = time.monotonic()


def main(argv: list[str]) -> None:
    """`python -m spark_jobs.fraud.processors.shard_host <socket path> <anchor pid>`: bind,
    say so on stdout (the starting worker waits for that line), then serve."""
    path, anchor_pid = argv[0], int(argv[1])
    try:
        anchor = psutil.Process(anchor_pid)
    except psutil.NoSuchProcess:
        return  # gone before the host started: nothing to serve
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the Spark application's to stop, not ours
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # a host that died without cleaning up (its starter holds the lock)
    listener.bind(path)
    listener.listen(4)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sys.stdout.close()
    try:
        serve(listener, anchor)
    finally:  # unlinked first: a worker that finds no file starts a new host
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        listener.close()


if __name__ == "__main__":
    main(sys.argv[1:])
