"""What the OS says about a process (through psutil): state, parent, session, start time,
command line.

A pid alone is not an identity: once a process exits the kernel may give its pid to another
one. The start time (psutil's `create_time`, as the cluster daemons' pid files record it)
together with the pid is, so the supervisor records both and compares them before it trusts
or signals a pid. The session id comes from os.getsid, which psutil does not expose.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import psutil

from spark_jobs.cluster.daemons import same_start

GONE_STATES = frozenset({psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD})  # exited, not yet reaped


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    status: str  # a psutil.STATUS_* value
    ppid: int
    sid: int
    create_time: float  # seconds since the epoch, psutil.Process.create_time()
    cmdline: tuple[str, ...]

    @property
    def alive(self) -> bool:
        return self.status not in GONE_STATES

    def started_at(self, create_time: float | None) -> bool:
        """True when this process is the one that started at `create_time`."""
        return create_time is not None and same_start(self.create_time, create_time)


def read_process(pid: int) -> ProcessInfo | None:
    """The process `pid` as it is now, or None when there is no such process (or it is not
    ours to read)."""
    try:
        process = psutil.Process(pid)
        with process.oneshot():
            status, ppid, created = process.status(), process.ppid(), process.create_time()
            try:
                cmdline = tuple(process.cmdline())
            except psutil.ZombieProcess:  # exited: its command line is gone
                cmdline = ()
        sid = os.getsid(pid)
    except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError, PermissionError):
        return None
    return ProcessInfo(pid, status, ppid, sid, created, cmdline)


def _in_session(pid: int, sid: int) -> bool:
    try:
        return os.getsid(pid) == sid
    except OSError:
        return False


def session_members(sid: int) -> list[ProcessInfo]:
    """Every process of session `sid` (a job and all it spawned, whatever their group)."""
    members = (read_process(pid) for pid in psutil.pids() if _in_session(pid, sid))
    return [info for info in members if info is not None and info.sid == sid]
