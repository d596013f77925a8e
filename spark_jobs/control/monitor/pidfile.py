"""The pid file of a job started by the supervisor: which process is the job, and since when.

`<lake.root>/_run/<job>.pid` (JSON) records the pid with its start time and command line, so
that a later pass never mistakes an unrelated process that got the same pid for the job. A
deliberate stop writes its time into the file: a record without one whose process is gone
means the job died.

The start time is psutil's `create_time` (seconds since the epoch). Files written before
that held `start_ticks` (clock ticks after boot, from /proc/<pid>/stat); such a record is
read with the same instant in create_time form (boot time + ticks / SC_CLK_TCK, psutil's own
formula), so a job started by the previous version is still recognised, and a pid reused
since is still not.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil

from spark_jobs.control.monitor.processes import ProcessInfo
from spark_jobs.control.monitor.state_files import read_json, run_dir, write_json
from spark_jobs.settings import Settings


@dataclass(frozen=True)
class RunRecord:
    """One start of a job. `signature` is the tail every process of it has on its command
    line (entry point and `job run NAME`); `create_time` is None when the process had exited
    before it could be read; `stopped_at_ms` is set by a deliberate stop."""

    job: str
    pid: int
    create_time: float | None
    started_at_ms: int
    command: tuple[str, ...]
    signature: tuple[str, ...]
    log: str
    stopped_at_ms: int | None = None

    @property
    def stopped(self) -> bool:
        return self.stopped_at_ms is not None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: Any) -> RunRecord | None:
        """The record, or None when the value is not one (a damaged or foreign file)."""
        try:
            return cls(
                job=str(value["job"]),
                pid=int(value["pid"]),
                create_time=_create_time(value),
                started_at_ms=int(value["started_at_ms"]),
                command=tuple(str(part) for part in value["command"]),
                signature=tuple(str(part) for part in value["signature"]),
                log=str(value["log"]),
                stopped_at_ms=None if value.get("stopped_at_ms") is None
                else int(value["stopped_at_ms"]),
            )
        except (KeyError, TypeError, ValueError):
            return None


def _create_time(value: dict[str, Any]) -> float | None:
    """The record's start time; a previous version's `start_ticks` converted (see above)."""
    if "create_time" in value:
        return None if value["create_time"] is None else float(value["create_time"])
    ticks = value["start_ticks"]  # KeyError: neither, not a record
    if ticks is None:
        return None
    return psutil.boot_time() + int(ticks) / os.sysconf("SC_CLK_TCK")


def runs_command(cmdline: tuple[str, ...], signature: tuple[str, ...]) -> bool:
    """True when the command line ends with the job's signature (spark-submit, the JVM it
    becomes and the Python driver all keep the application arguments at the end)."""
    return bool(signature) and cmdline[-len(signature) :] == signature


def identifies(record: RunRecord, process: ProcessInfo | None) -> bool:
    """True when `process` is the live process the record describes, not a later process
    that reuses its pid: same pid, same start time, the job's command line, not exited."""
    return (
        process is not None
        and process.alive
        and process.pid == record.pid
        and process.started_at(record.create_time)
        and runs_command(process.cmdline, record.signature)
    )


def pid_path(settings: Settings, job: str) -> Path:
    return run_dir(settings) / f"{job}.pid"


def read_record(settings: Settings, job: str) -> RunRecord | None:
    """The job's pid file, or None when the monitor never started it."""
    value = read_json(pid_path(settings, job))
    return None if value is None else RunRecord.from_json(value)


def write_record(settings: Settings, record: RunRecord) -> None:
    write_json(pid_path(settings, record.job), record.to_json())
