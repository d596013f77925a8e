"""What Linux says about a process (/proc): state, group, session, start time, command line.

A pid alone is not an identity: once a process exits the kernel may give its pid to another
one. The start time (clock ticks after boot) together with the pid is, so the supervisor
records both and compares them before it trusts or signals a pid.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
GONE_STATES = frozenset({"Z", "X", "x"})  # zombie or dead: exited, only not yet reaped


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    state: str
    ppid: int
    pgid: int
    sid: int
    start_ticks: int
    cmdline: tuple[str, ...]

    @property
    def alive(self) -> bool:
        return self.state not in GONE_STATES


def parse_stat(text: str) -> tuple[str, int, int, int, int]:
    """(state, ppid, pgid, sid, start_ticks) from /proc/<pid>/stat.

    The command name in parentheses may hold spaces and parentheses itself, so the fields are
    counted from the last ')'.
    """
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19])


def read_process(pid: int, proc: Path = PROC) -> ProcessInfo | None:
    """The process `pid` as it is now, or None when there is no such process."""
    if not proc.is_dir():
        raise RuntimeError(f"process supervision needs Linux {proc}, which is missing")
    try:
        state, ppid, pgid, sid, start_ticks = parse_stat((proc / str(pid) / "stat").read_text())
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except (OSError, ValueError, IndexError):
        return None
    cmdline = tuple(part.decode(errors="replace") for part in raw.split(b"\0")[:-1])
    return ProcessInfo(pid, state, ppid, pgid, sid, start_ticks, cmdline)


def session_members(sid: int, proc: Path = PROC) -> list[ProcessInfo]:
    """Every process of session `sid` (a job and all it spawned, whatever their group)."""
    members = []
    for entry in proc.iterdir():
        if entry.name.isdigit():
            info = read_process(int(entry.name), proc)
            if info is not None and info.sid == sid:
                members.append(info)
    return members
