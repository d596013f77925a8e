"""Long-lived Spark daemons (master, worker, history server) as recorded child processes.

Each daemon runs `spark-class <main class> ...` from the installed PySpark in a session of its
own (spark-class execs the JVM, so the recorded pid is the JVM's) with its output in a log
file. `<home>/<name>.pid` (JSON) keeps the pid with the process's start time, so that a later
`tideline cluster stop` never signals an unrelated process that got the same pid, and stopping
signals the daemon's whole session (a worker's executors are its children).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil

STOP_GRACE_S = 15.0
# create_time is the boot time plus the start in clock ticks, and the kernel moves its boot
# time when the system clock is stepped: two reads of one process may differ a little.
START_TOLERANCE_S = 1.0


def spark_home() -> Path:
    """The installed PySpark: its bin/ and jars/ make a Spark distribution."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def daemon_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """What every daemon runs with: this Spark, this Python for executors' workers, loopback."""
    environment = {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
        "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"),
        "SPARK_NO_DAEMONIZE": "1",
    }
    environment.update(extra or {})
    return environment


@dataclass(frozen=True)
class DaemonRecord:
    """One started daemon: `create_time` tells it from a later process with the same pid."""

    name: str
    pid: int
    create_time: float
    command: tuple[str, ...]
    log: str

    @classmethod
    def from_json(cls, value: Any) -> DaemonRecord | None:
        try:
            return cls(str(value["name"]), int(value["pid"]), float(value["create_time"]),
                       tuple(str(part) for part in value["command"]), str(value["log"]))
        except (KeyError, TypeError, ValueError):
            return None


def pid_path(home: Path, name: str) -> Path:
    return home / f"{name}.pid"


def read_record(home: Path, name: str) -> DaemonRecord | None:
    try:
        return DaemonRecord.from_json(json.loads(pid_path(home, name).read_text()))
    except (OSError, ValueError):
        return None


def recorded_names(home: Path) -> list[str]:
    """Names of the daemons with a pid file under `home`."""
    return sorted(path.stem for path in home.glob("*.pid")) if home.is_dir() else []


def same_start(create_time: float, recorded: float) -> bool:
    """True when a process started at `create_time` is the one recorded at `recorded`."""
    return abs(create_time - recorded) <= START_TOLERANCE_S


def process_of(record: DaemonRecord) -> psutil.Process | None:
    """The live process the record describes (None: gone, or its pid now belongs to another)."""
    try:
        process = psutil.Process(record.pid)
        if not same_start(process.create_time(), record.create_time):
            return None
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        return process
    except psutil.Error:
        return None


def start_daemon(home: Path, name: str, main_class: str, arguments: Sequence[str],
                 environment: Mapping[str, str]) -> DaemonRecord:
    """Start `spark-class main_class arguments` in its own session; record and return it."""
    home.mkdir(parents=True, exist_ok=True)
    log = home / "logs" / f"{name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    command = (str(spark_home() / "bin" / "spark-class"), main_class, *arguments)
    with log.open("ab") as out:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out,
                                   stderr=subprocess.STDOUT, env=dict(environment),
                                   start_new_session=True, cwd=home)
    record = DaemonRecord(name, process.pid, psutil.Process(process.pid).create_time(),
                          command, str(log))
    temp = pid_path(home, f".{name}")
    temp.write_text(json.dumps(asdict(record)))
    os.replace(temp, pid_path(home, name))
    return record


def daemon_session(record: DaemonRecord) -> list[psutil.Process]:
    """The daemon and every live process of its session (executors it launched included)."""
    found = []
    for process in psutil.process_iter(["pid"]):
        with contextlib.suppress(psutil.Error):
            if os.getsid(process.pid) == record.pid:
                found.append(process)
    return found


def stop_daemon(home: Path, name: str, grace_s: float = STOP_GRACE_S) -> bool:
    """SIGTERM the daemon's session, SIGKILL what is left after `grace_s`; drop the pid file.
    True when a live daemon was stopped."""
    record = read_record(home, name)
    was_alive = record is not None and process_of(record) is not None
    members = daemon_session(record) if was_alive and record is not None else []
    for process in members:
        with contextlib.suppress(psutil.Error):
            process.send_signal(signal.SIGTERM)
    _, left = psutil.wait_procs(members, timeout=grace_s)
    for process in left:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(left, timeout=5)
    with contextlib.suppress(FileNotFoundError):
        pid_path(home, name).unlink()
    return was_alive


def kill_daemon(record: DaemonRecord) -> None:
    """SIGKILL the daemon and everything it started (a worker's executors and their Python
    workers), as when its machine is lost."""
    if process_of(record) is None:
        return
    members = daemon_session(record)
    for process in members:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(members, timeout=10)


def wait_until(predicate: Any, timeout_s: float, every_s: float = 0.25) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(every_s)
    return bool(predicate())
