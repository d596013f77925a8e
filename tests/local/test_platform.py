"""`tideline platform` (`make demo`) end to end: it prints where and how to log in, Airflow
refuses anonymous requests and accepts the printed credentials, the Tideline pages need the
login too, the dashboard shows experiment results (the first minutes of a new user: how long
after the start is measured and recorded, test-artifacts/platform-first-results.json), and
Ctrl-C stops everything it started, exit status 0.

The platform runs as a user would start it, in a session of its own, with a config file
that moves its lake, Airflow home and ports into tmp. The embedded broker's port is fixed
(`EMBEDDED_BROKER_PORT`: any other kafka.bootstrap means an external Kafka), so the test
needs it free. "Everything it started" is checked three ways after the exit: its own
session, every process seen descending from it (and their sessions: Airflow, the broker and
the jobs start sessions of their own), and any process whose environment names the tmp
root (a job deployed by a task process, started after the last look at the tree).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
import pytest
import yaml
from helpers.airflow_setup import ARTIFACTS, own_environment

from spark_jobs.control.monitor import processes
from spark_jobs.control.orchestration.environment import REPO_ROOT
from spark_jobs.local.broker import free_port
from spark_jobs.local.platform_stack import DAG_IDS
from spark_jobs.settings import EMBEDDED_BROKER_PORT

pytestmark = [pytest.mark.airflow, pytest.mark.e2e]

READY_TIMEOUT_S = 240.0
RESULTS_TIMEOUT_S = 300.0  # generous: the measured time is recorded, not asserted
STOP_TIMEOUT_S = 120.0
USERS = 200  # traffic of ~4 messages/s: the generator costs next to nothing
STACK_FRAME = re.compile(r"^\s+(at \S+\(.*\)|\.\.\. \d+ more)")  # a JVM trace's frames
NO_RESULTS = "platform-no-results.txt"  # test-artifacts/: why the dashboard stayed empty
DIAGNOSIS_SHOWN = 30_000  # characters of it in the failure message
BANNER = re.compile(
    r"Airflow UI : (?P<url>\S+)\n\s+user\s+: (?P<user>\S+)\n\s+password\s+: (?P<password>\S+)"
    r"\n\s+dashboard\s+: (?P<dashboard>\S+)"
)


@dataclass
class Platform:
    process: subprocess.Popen[bytes]
    output: Path
    root: Path
    url: str = ""
    dashboard: str = ""
    user: str = ""
    password: str = ""
    started_s: float = 0.0
    seen: list[processes.ProcessInfo] = field(default_factory=list)  # its process tree, running

    def text(self) -> str:
        return self.output.read_text(errors="replace") if self.output.exists() else ""


def platform_config(root: Path) -> Path:
    """Lake, Airflow home and ports under the test's control; validation starts today, so
    the daily DAGs have no day to catch up on while the test runs."""
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    config = {
        "lake": {"root": str(root / "lake")},
        "airflow": {"home": str(root / "airflow_home"), "port": free_port()},
        "dashboard": {"port": free_port()},
        "validation": {"start_date": today},
    }
    path = root / "tideline.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def platform_environment(config: Path) -> dict[str, str]:
    """Our environment with the config; Airflow's log servers on free ports (8793 and 8794
    would clash with any other Airflow on this machine)."""
    return own_environment() | {
        "TIDELINE_CONFIG": str(config),
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
        "PYTHONUNBUFFERED": "1",
    }


def wait_for_banner(platform: Platform, timeout_s: float) -> None:
    """Until the platform prints the UI address and login; fails if it exits first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        match = BANNER.search(platform.text())
        if match:
            platform.url, platform.user, platform.password, platform.dashboard = match.group(
                "url", "user", "password", "dashboard")
            return
        assert platform.process.poll() is None, f"platform exited:\n{platform.text()[-3000:]}"
        time.sleep(1.0)
    raise AssertionError(f"no login printed after {timeout_s:.0f} s:\n{platform.text()[-3000:]}")


def descendants(root_pid: int) -> list[processes.ProcessInfo]:
    """Every live process below root_pid in the process tree."""
    running = [p for p in map(processes.read_process, psutil.pids()) if p is not None and p.alive]
    children: dict[int, list[processes.ProcessInfo]] = {}
    for process in running:
        children.setdefault(process.ppid, []).append(process)
    found, todo = [], [root_pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child.pid)
    return found


def same_process_alive(seen: processes.ProcessInfo) -> bool:
    now = processes.read_process(seen.pid)
    return now is not None and now.alive and now.started_at(seen.create_time)


def processes_naming(root: Path) -> list[processes.ProcessInfo]:
    """Live processes whose environment or command line mentions root (started for us)."""
    needle = str(root)
    found = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            texts = [*process.environ().values(), *process.cmdline()]
            if any(needle in text for text in texts):
                info = processes.read_process(process.pid)
                if info is not None and info.alive and process.pid != os.getpid():
                    found.append(info)
    return found


def leftovers(platform: Platform, seen: list[processes.ProcessInfo]) -> list[processes.ProcessInfo]:
    """What is still alive of the platform's session, what it spawned, and their sessions."""
    sessions = {platform.process.pid} | {p.sid for p in seen}
    alive = {p.pid: p for sid in sessions for p in processes.session_members(sid) if p.alive}
    alive |= {p.pid: p for p in seen if same_process_alive(p)}
    alive |= {p.pid: p for p in processes_naming(platform.root)}
    return sorted(alive.values(), key=lambda p: p.pid)


def kill_leftovers(platform: Platform, seen: list[processes.ProcessInfo]) -> None:
    """Clean up after a failed test: SIGKILL what the platform left (all started by us)."""
    for process in [*leftovers(platform, seen), *descendants(platform.process.pid)]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(platform.process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        platform.process.wait(timeout=10)


@pytest.fixture
def platform(tmp_path: Path) -> Iterator[Platform]:
    """`tideline platform` started as from a terminal, in a session of its own."""
    if not port_free(EMBEDDED_BROKER_PORT):
        pytest.fail(f"port {EMBEDDED_BROKER_PORT} (the embedded broker's) is in use: "
                    "stop what listens there (a running `make demo`?)")
    config = platform_config(tmp_path)
    env = platform_environment(config)
    dashboard_port = yaml.safe_load(config.read_text())["dashboard"]["port"]
    output = tmp_path / "platform.out"
    tideline = Path(sys.executable).with_name("tideline")
    with output.open("wb") as out:
        process = subprocess.Popen(
            [str(tideline), "platform", "--users", str(USERS)], env=env, cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    running = Platform(process, output, tmp_path, started_s=time.monotonic(),
                       dashboard=f"http://127.0.0.1:{dashboard_port}")
    try:
        yield running
    finally:
        if process.poll() is None or leftovers(running, running.seen):
            kill_leftovers(running, running.seen)
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / "platform.out").write_text(running.text())


def check_login(platform: Platform) -> None:
    """The printed credentials work; without them Airflow and the Tideline pages refuse."""
    # 30 s, as the platform's own client: a fresh API server beside starting Spark jobs has
    # taken over 10 s to answer on CI's two cores
    with httpx.Client(base_url=platform.url, timeout=30.0, follow_redirects=False) as api:
        assert api.get("/api/v2/dags").status_code == 401
        assert api.get("/tideline/alerts").status_code == 401
        browser = api.get("/tideline/alerts", headers={"accept": "text/html"})
        assert browser.status_code == 303 and "/auth/login" in browser.headers["location"]
        wrong = {"username": platform.user, "password": "wrong"}
        assert api.post("/auth/token", json=wrong).status_code == 401
        right = {"username": platform.user, "password": platform.password}
        login = api.post("/auth/token", json=right)
        assert login.status_code == 201, login.text
        bearer = {"authorization": f"Bearer {login.json()['access_token']}"}
        dags = api.get("/api/v2/dags", headers=bearer, params={"limit": 100})
        assert dags.status_code == 200
        unpaused = {d["dag_id"]: d["is_paused"] for d in dags.json()["dags"]}
        assert unpaused == dict.fromkeys(DAG_IDS, False)
        assert api.get("/tideline/alerts", headers=bearer).status_code == 200


def _file_tail(path: Path, lines: int) -> str:
    """The last lines of a file, JVM stack frames left out; a file gone or unreadable says so
    instead of raising (a job rotates its progress history, the monitor removes run files)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        return f"(unreadable: {exc!r})"
    tail = [line for line in text if not STACK_FRAME.match(line)][-lines:]
    return "\n".join(line[:300] for line in tail)


def diagnosis_files(root: Path) -> list[tuple[Path, int]]:
    """(file, lines to show) that tell why no result came: each job's log, latest progress and
    its history, its run files, and the last two watch runs of the streaming_jobs DAG."""
    lake = root / "lake"
    files = [(path, 25) for path in sorted(lake.glob("_logs/*.log"))]
    files += [(path, 5) for path in sorted([*lake.glob("_progress/*.json"),
                                           *lake.glob("_run/*.json"), *lake.glob("_run/*.pid")])]
    files += [(path, 3) for path in sorted(lake.glob("_progress/*.jsonl"))]
    runs = sorted((root / "airflow_home" / "logs" / "dag_id=streaming_jobs").glob("run_id=*"))
    for run in runs[-2:]:  # scheduled__<ISO time>: sorted in time order
        files += [(path, 10) for path in sorted(run.glob("task_id=*/attempt=*.log"))]
    return files


def job_logs_tail(platform: Platform) -> str:
    """Every diagnosis file's tail; it never raises, so it cannot hide the failure it explains."""
    try:
        parts = [f"--- {path.relative_to(platform.root)}\n{_file_tail(path, lines)}"
                 for path, lines in diagnosis_files(platform.root)]
    except Exception as exc:  # a folder removed while listed, say
        return f"(diagnosis failed: {exc!r})"
    return "\n".join(parts) or "(no job or Airflow log under the test's folder)"


def wait_for_first_results(platform: Platform, timeout_s: float) -> float:
    """Seconds from the platform's start until the dashboard (on its configured port, polled
    from the start) lists an experiment with results (live or final); they are written to
    test-artifacts/ for BENCHMARKS.md."""
    deadline = time.monotonic() + timeout_s
    last = "no answer yet"
    with httpx.Client(base_url=platform.dashboard, timeout=10.0) as dashboard:
        while time.monotonic() < deadline:
            try:
                answer = dashboard.get("/api/experiments")
                last = f"{answer.status_code}: {answer.text[:300]}"
            except httpx.TransportError as exc:  # not listening yet
                answer, last = None, repr(exc)
            if answer is not None and answer.status_code == 200 and answer.json()["experiments"]:
                first_s = time.monotonic() - platform.started_s
                listed = [e["hash"] for e in answer.json()["experiments"]]
                ARTIFACTS.mkdir(exist_ok=True)
                (ARTIFACTS / "platform-first-results.json").write_text(json.dumps(
                    {"first_results_s": round(first_s, 1), "experiments": listed}))
                return first_s
            assert platform.process.poll() is None, f"platform exited:\n{platform.text()[-3000:]}"
            time.sleep(1.0)
    diagnosis = f"last answer: {last}\n{job_logs_tail(platform)}"
    with contextlib.suppress(OSError):
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / NO_RESULTS).write_text(diagnosis, encoding="utf-8")
    if len(diagnosis) > DIAGNOSIS_SHOWN:
        cut = f"… (cut: all of it in test-artifacts/{NO_RESULTS})"
        diagnosis = f"{diagnosis[:DIAGNOSIS_SHOWN]}\n{cut}"
    raise AssertionError(f"the dashboard showed no experiment {timeout_s:.0f} s after the "
                         f"start:\n{platform.text()[-3000:]}\n{diagnosis}")


def press_ctrl_c(platform: Platform) -> float:
    """SIGINT to the platform's process group, as a terminal's Ctrl-C; returns how long the
    platform took to exit (status 0)."""
    platform.seen.extend(descendants(platform.process.pid))
    names = " ".join(" ".join(p.cmdline) for p in platform.seen)
    assert "tansu" in names and "airflow" in names, names  # the broker and Airflow run
    pressed = time.monotonic()
    os.killpg(platform.process.pid, signal.SIGINT)
    assert platform.process.wait(timeout=STOP_TIMEOUT_S) == 0, platform.text()[-3000:]
    return time.monotonic() - pressed


def test_platform_prints_a_working_login_shows_results_and_ctrl_c_stops_everything(platform):
    with ThreadPoolExecutor(1) as watcher:  # results may come before Airflow is up
        first_results = watcher.submit(wait_for_first_results, platform, RESULTS_TIMEOUT_S)
        wait_for_banner(platform, READY_TIMEOUT_S)
        ready_s = time.monotonic() - platform.started_s
        check_login(platform)
        first_s = first_results.result()
    stop_s = press_ctrl_c(platform)
    assert leftovers(platform, platform.seen) == []
    text = platform.text()
    for step in ("stopped traffic", "stopped dashboard", "stopped Airflow",
                 "stopped streaming jobs", "stopped broker"):
        assert step in text, text[-3000:]
    print(f"platform ready after {ready_s:.0f} s, first results after {first_s:.0f} s, "
          f"stopped in {stop_s:.0f} s")
