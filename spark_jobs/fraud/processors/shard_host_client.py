"""A Python worker's line to its executor's host of one shard (shard_host.py), started by
the first worker that needs it.

Hosts are found by a Unix socket in a directory only this user can enter, named by the
process they live for (the worker's parent: the executor's Python daemon), the query's
state and the shard, so two executors on one machine, or two queries, never share one. A
lock file per query state and shard (kept: a few per query) makes sure one worker starts a
missing host, not two; under it, a socket file that nobody answers (its host was killed)
is removed before the new host binds its own.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import select
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from spark_jobs.fraud.processors.shard_host import EngineSpec

START_TIMEOUT_S = 60.0  # for a new host to import the engine and bind its socket
# for a host to take a connection: it serves one task at a time, and a shard's tasks come
# one after the other (a retried one may wait for the attempt before it to let go)
HANDSHAKE_TIMEOUT_S = 300.0
MAX_SOCKET_PATH = 100  # bytes: AF_UNIX paths end at 104-108 bytes
# `-c`, not `-m`: run as __main__ the module would be imported a second time by the
# first EngineSpec unpickled
HOST_ENTRY = ("import sys; from spark_jobs.fraud.processors.shard_host import main; "
              "main(sys.argv[1:])")
_STARTED: list[subprocess.Popen[bytes]] = []  # hosts this worker started (reaped at the next)


class ShardHostError(RuntimeError):
    """A shard host could not be started or reached, or failed a call."""


def hosts_directory() -> Path:
    """The directory of this user's host sockets (mode 0700, checked: the sockets take
    pickles, so nobody else may reach them)."""
    directory = Path(tempfile.gettempdir()) / f"tideline-fraud-shards-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        directory.mkdir(mode=0o700)
    info = directory.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise ShardHostError(f"{directory} must be a directory of this user with mode 0700")
    return directory


def host_path(state_id: str, shard: int, anchor_pid: int) -> str:
    path = str(hosts_directory() / f"{anchor_pid}-{_state_name(state_id, shard)}.sock")
    if len(path.encode()) > MAX_SOCKET_PATH:
        raise ShardHostError(f"the fraud shard host socket path {path} is longer than "
                             f"{MAX_SOCKET_PATH} bytes: point TMPDIR to a shorter directory")
    return path


def _state_name(state_id: str, shard: int) -> str:
    return f"{hashlib.sha1(state_id.encode()).hexdigest()[:16]}-{shard}"


class ShardHostConnection:
    """One task's conversation with a shard's host: `call` a method, get its result."""

    def __init__(self, connection: Connection, path: str) -> None:
        self._connection = connection
        self.path = path

    def call(self, method: str, *args: Any) -> Any:
        try:
            self._connection.send((method, args))
            ok, result = self._connection.recv()
        except (EOFError, OSError) as exc:
            raise ShardHostError(f"the fraud shard host at {self.path} is gone during "
                                 f"{method}: {exc!r}") from exc
        if not ok:
            raise ShardHostError(f"fraud shard host, {method}: {result}")
        return result

    def close(self) -> None:
        self._connection.close()


@contextlib.contextmanager
def shard_host(state_id: str, shard: int, spec: EngineSpec,
               anchor_pid: int | None = None) -> Iterator[ShardHostConnection]:
    """A connection to the shard's host on this executor, which is started when missing;
    closed at the end (the host serves one task at a time)."""
    anchor = os.getppid() if anchor_pid is None else anchor_pid
    path = host_path(state_id, shard, anchor)
    connection = _connect(path, spec)
    if connection is None:
        with _lock(str(hosts_directory() / f"{_state_name(state_id, shard)}.lock")):
            connection = _connect(path, spec)  # another worker may have started it
            if connection is None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)  # a killed host's: nobody answers there
                _start(path, anchor)
                connection = _connect(path, spec)
        if connection is None:
            raise ShardHostError(f"a fraud shard host started at {path} takes no connection")
    try:
        yield connection
    finally:
        connection.close()


def _connect(path: str, spec: EngineSpec) -> ShardHostConnection | None:
    """A connection whose host has taken `spec`; None when no host listens at `path` (or
    one exits as it is reached)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
        return None
    connection = Connection(sock.detach())
    try:
        connection.send(spec)
        if not connection.poll(HANDSHAKE_TIMEOUT_S):
            connection.close()
            raise ShardHostError(f"the fraud shard host at {path} took no connection in "
                                 f"{HANDSHAKE_TIMEOUT_S:.0f} s (a task before holds it)")
        connection.recv()
    except (EOFError, OSError):  # it exited as it was reached
        connection.close()
        return None
    return ShardHostConnection(connection, path)


@contextlib.contextmanager
def _lock(path: str) -> Iterator[None]:
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # the lock goes with it


def _start(path: str, anchor_pid: int) -> None:
    """Start a host and wait until it listens. Its own session: a signal to the worker's
    process group (Ctrl-C in a terminal) is the application's to handle, and the host ends
    when the anchor does."""
    _STARTED[:] = [started for started in _STARTED if started.poll() is None]  # reaped
    # the worker's own import path (Spark may add the job's files to it at run time)
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    process = subprocess.Popen(
        [sys.executable, "-c", HOST_ENTRY, path, str(anchor_pid)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=environment,
        start_new_session=True)
    _STARTED.append(process)
    assert process.stdout is not None
    deadline = time.monotonic() + START_TIMEOUT_S
    with process.stdout:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([process.stdout], [], [], 0.5)
            if ready:
                if process.stdout.readline() == b"ready\n":
                    return
                break  # stdout closed without the line: it failed
            if process.poll() is not None:
                break
    if process.poll() is None:
        process.kill()
    raise ShardHostError(f"the fraud shard host for {path} did not start (exit code "
                         f"{process.wait()}; its error is in the executor's log)")
