"""`airflow standalone` as a child process group: start, wait until healthy, stop everything.

Once healthy, `prepare` creates what the DAGs need in Airflow's database (the Spark pool).

Standalone spawns the scheduler, DAG processor, triggerer and API server, and the
LocalExecutor forks task processes that move into process groups of their own. A SIGTERM to
the parent alone leaves dozens of them behind, so the child starts in a new session and
stopping it signals its process group and then every process left in that session.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO

import httpx

from spark_jobs.config.network import connect_host, port_in_use
from spark_jobs.control.monitor import processes
from spark_jobs.control.orchestration.environment import (
    ADMIN_USER,
    airflow_executable,
    passwords_file,
)

HEALTH_PATH = "/api/v2/monitor/health"
EXECUTION_HEALTH_PATH = "/execution/health"
COMPONENTS = ("metadatabase", "scheduler", "triggerer", "dag_processor")
READY_TIMEOUT_S = 240.0
STOP_GRACE_S = 20.0
PREPARE_TIMEOUT_S = 60.0  # read timeout of the first API calls after Airflow is healthy


class AirflowStartError(RuntimeError):
    """Airflow exited or did not become healthy; the message ends with its log tail."""


def _log_tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"


def session_members(session_id: int) -> list[int]:
    """Pids of the live processes of a session: processes that moved to a process group of
    their own stay in the session, so this finds what killpg misses."""
    return [p.pid for p in processes.session_members(session_id) if p.alive]


def stop_session(leader: subprocess.Popen[bytes], grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM the leader's group and session, SIGKILL what is left after `grace_s`."""
    session_id = leader.pid
    with contextlib.suppress(ProcessLookupError):
        os.killpg(session_id, signal.SIGTERM)
    for pid in session_members(session_id):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        leader.poll()
        if not session_members(session_id):
            break
        time.sleep(0.2)
    for pid in session_members(session_id):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        leader.wait(timeout=5)


class AirflowStandalone:
    """One `airflow standalone` for an environment from `airflow_environment`.

    `with AirflowStandalone(env, log_path) as airflow:` starts it and waits until the API
    server answers and every component is healthy; leaving the block stops the whole session.
    """

    def __init__(
        self, env: Mapping[str, str], log_path: str | Path, cwd: str | Path | None = None
    ) -> None:
        self.env = dict(env)
        self.home = Path(self.env["AIRFLOW_HOME"])
        self.log_path = Path(log_path)
        self.cwd = cwd
        host, port = self.env["AIRFLOW__API__HOST"], self.env["AIRFLOW__API__PORT"]
        self.local_url = f"http://{connect_host(host)}:{port}"
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self, timeout_s: float = READY_TIMEOUT_S) -> AirflowStandalone:
        """Start Airflow in a new session and return once it is healthy."""
        if self._process is not None:
            return self
        if port_in_use(self.env["AIRFLOW__API__HOST"], int(self.env["AIRFLOW__API__PORT"]), 1.0):
            raise AirflowStartError(
                f"{self.local_url} is already in use: stop what listens there or choose "
                "another port (TIDELINE_AIRFLOW__PORT)"
            )
        self.home.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self._process = subprocess.Popen(
            [airflow_executable(), "standalone"],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=self.env,
            cwd=self.cwd,
            start_new_session=True,
        )
        try:
            self.wait_healthy(timeout_s)
            self.prepare()
        except BaseException:
            self.stop()
            raise
        return self

    def health(self) -> dict[str, str]:
        """Status of each component, e.g. {"scheduler": "healthy", ...}; raises when down."""
        answer = httpx.get(self.local_url + HEALTH_PATH, timeout=5.0)
        answer.raise_for_status()
        body = answer.json()
        return {name: (body.get(name) or {}).get("status") or "absent" for name in COMPONENTS}

    def wait_healthy(self, timeout_s: float) -> None:
        """Poll the health endpoint until every component is healthy and a password exists."""
        deadline = time.monotonic() + timeout_s
        last = "API server not answering"
        while time.monotonic() < deadline:
            if not self.running():
                code = self._process.returncode if self._process else None
                raise AirflowStartError(
                    f"airflow standalone exited (code {code}); log tail:\n"
                    f"{_log_tail(self.log_path)}"
                )
            try:
                status = self.health()
            except (httpx.HTTPError, ValueError) as exc:
                last = f"API server not answering ({exc.__class__.__name__})"
            else:
                unhealthy = {k: v for k, v in status.items() if v != "healthy"}
                if not unhealthy and passwords_file(self.home).exists():
                    return
                last = f"not healthy yet: {unhealthy or 'no password file'}"
            time.sleep(1.0)
        raise AirflowStartError(
            f"Airflow at {self.local_url} not healthy after {timeout_s:.0f} s ({last}); "
            f"log tail:\n{_log_tail(self.log_path)}"
        )

    def warm_execution_api(self) -> None:
        """Have the API server build its Execution API now, while we wait for it.

        It builds the Execution API's versioned routes (cadwyn) on that API's first request,
        inside its event loop: every request to the server, /api/v2 included, waits behind it.
        On two cores beside starting Spark jobs that took 5-12 s, long enough to time out a
        caller's first call at random (a task's 5 s default, the platform's login check)."""
        with contextlib.suppress(httpx.TransportError):  # prepare's calls then say why
            httpx.get(self.local_url + EXECUTION_HEALTH_PATH, timeout=PREPARE_TIMEOUT_S)

    def prepare(self) -> None:
        """Create what Tideline's DAGs need in Airflow's database (the Spark pool), sized by
        the settings Airflow's tasks see."""
        from spark_jobs.control.orchestration.airflow_api import AirflowClient
        from spark_jobs.control.orchestration.pools import ensure_pools
        from spark_jobs.settings import load_settings

        self.warm_execution_api()
        # A cold API server's first requests (login, then the pool) can take tens of seconds
        # while it parses DAGs on a busy machine: a long read timeout (the client retries).
        with AirflowClient(self.local_url, ADMIN_USER, self.admin_password(),
                           timeout_s=PREPARE_TIMEOUT_S) as client:
            ensure_pools(client, load_settings(self.env))

    def admin_password(self) -> str:
        """The password the simple auth manager generated for the admin user."""
        passwords = json.loads(passwords_file(self.home).read_text())
        return str(passwords[ADMIN_USER])

    def stop(self) -> None:
        """Stop every process Airflow started (safe to call twice)."""
        process, self._process = self._process, None
        if process is not None:
            stop_session(process)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> AirflowStandalone:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
