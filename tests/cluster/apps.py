"""What the cluster tests do to the test cluster: run a `tideline` command as a Spark
application on it (a child process with exactly the given settings, as users run jobs), wait
for a job's progress, and lose a worker (SIGKILL its JVM and executors) for a new one, when
it pleases or while its executor runs a task of the job."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pyarrow as pa

from spark_jobs.cluster.daemons import daemon_session, kill_daemon, read_record
from spark_jobs.cluster.settings import ClusterSettings
from spark_jobs.cluster.standalone import start_worker, worker_name
from spark_jobs.control.submit import freeze_settings, frozen_environment
from spark_jobs.settings import Settings
from spark_jobs.streaming.application import read_application
from spark_jobs.streaming.progress import read_progress
from spark_jobs.streaming.settings import event_log_dir

APP_TIMEOUT_S = 600
# How tasks may fail when a worker is lost: with its executor, fetching the shuffle files it
# held, or killed when their stage is resubmitted; anything else is a fault the retry hid.
RECOVERY_FAILURES = {"ExecutorLostFailure", "FetchFailed", "TaskKilled"}
FREEZE_SETTLE_S = 1.0  # a frozen executor's last status update reaches the driver by then
# How long a frozen worker waits to be handed a task: past the scheduler's locality wait (3 s),
# after which a task that prefers the other executor is offered to any free one.
TASK_WAIT_S = 8.0


def start_cli(settings: Settings, name: str, arguments: list[str], folder: Path
              ) -> subprocess.Popen[bytes]:
    """`tideline ARGUMENTS` in its own session, logging to `<folder>/<name>.log` (and its
    stdout alone to `<name>.out`, what the command reports)."""
    config = freeze_settings(settings, folder / f"{name}.yaml")
    log = (folder / f"{name}.log").open("ab")
    out = (folder / f"{name}.out").open("wb")
    return subprocess.Popen(
        [sys.executable, "-m", "spark_jobs.cli", *arguments],
        env=frozen_environment(config, os.environ), start_new_session=True,
        stdout=out, stderr=log)


def start_job(settings: Settings, job: str, folder: Path) -> subprocess.Popen[bytes]:
    """`tideline job run JOB --available-now`: the job ends once it has read every topic."""
    return start_cli(settings, job, ["job", "run", job, "--available-now"], folder)


def finish(process: subprocess.Popen[bytes], name: str, folder: Path) -> str:
    """Wait for the application to exit 0 (else fail with its log's tail); its stdout."""
    code = process.wait(APP_TIMEOUT_S)
    assert code == 0, log_text(folder, name)[-4000:]
    return (folder / f"{name}.out").read_text()


def run_job(settings: Settings, job: str, folder: Path) -> None:
    finish(start_job(settings, job, folder), job, folder)


def log_text(folder: Path, name: str) -> str:
    return (folder / f"{name}.log").read_text(errors="replace")


def wait_for_batch(settings: Settings, job: str, process: subprocess.Popen[bytes],
                   folder: Path, batch: int, timeout_s: float = 300) -> None:
    """Return once the running job reported micro-batch `batch` (fail if it died first)."""
    deadline = time.monotonic() + timeout_s
    while (read_progress(settings, job) or {}).get("batchId", -1) < batch:
        assert process.poll() is None, log_text(folder, job)[-3000:]
        assert time.monotonic() < deadline, f"{job} made no progress"
        time.sleep(0.2)


def lose_worker(cluster: ClusterSettings, index: int) -> None:
    """SIGKILL worker `index` with its executor and their Python workers (a lost machine),
    then start a new worker under the same name; the master hands it executors."""
    record = read_record(Path(cluster.home), worker_name(index))
    assert record is not None, f"worker {index} was never started"
    kill_daemon(record)
    start_worker(cluster, index)


def busy_workers(cluster: ClusterSettings, settings: Settings, job: str) -> set[int] | None:
    """The workers whose executor is running a task of the job right now, in the driver's
    view (its REST API; a standalone worker keeps each executor's folder
    `<work>/<app>/<executor>`); None while the driver cannot say."""
    app = read_application(settings, job)
    if app is None:
        return None
    try:
        executors = httpx.get(f"{app['ui']}/api/v1/applications/{app['app_id']}/executors",
                              timeout=10).json()
    except (httpx.HTTPError, ValueError):
        return None
    work = Path(cluster.home) / "work"
    return {index for executor in executors
            if executor["id"] != "driver" and executor["isActive"] and executor["activeTasks"]
            for index in range(1, cluster.workers + 1)
            if (work / worker_name(index) / app["app_id"] / executor["id"]).is_dir()}


def lose_busy_worker(cluster: ClusterSettings, settings: Settings, job: str,
                     process: subprocess.Popen[bytes], timeout_s: float = 120) -> int:
    """lose_worker() a worker while its executor runs a task of the job (the application
    `process`): that task is lost with it and must be retried elsewhere. Returns the
    worker's index.

    Tasks of a small batch take milliseconds, and once the job has read its input no task
    runs at all, so polling for a running task races the job. Instead each worker in turn is
    frozen first (SIGSTOP on its whole session): the driver, unaware for a while, still hands
    its executor tasks, and those stay running in its view. The worker is killed once the
    driver counts such a task; if none comes within TASK_WAIT_S it is thawed and the next
    worker is tried."""
    deadline = time.monotonic() + timeout_s
    for index in itertools.cycle(range(1, cluster.workers + 1)):
        assert process.poll() is None, f"{job} ended before a task of it was caught running"
        assert time.monotonic() < deadline, f"no task of {job} caught running"
        if _caught_running(cluster, settings, job, index):
            lose_worker(cluster, index)
            return index
    raise AssertionError("unreachable")


def _caught_running(cluster: ClusterSettings, settings: Settings, job: str, index: int
                    ) -> bool:
    """Freeze worker `index`'s session; True (left frozen) if, once any status update sent
    before the freeze has landed, the driver counts a task of the job running there within
    TASK_WAIT_S; else (or on any error) thaw it and say False."""
    record = read_record(Path(cluster.home), worker_name(index))
    assert record is not None, f"worker {index} was never started"
    members = daemon_session(record)
    for process in members:
        with contextlib.suppress(psutil.Error):
            process.suspend()
    caught = False
    try:
        time.sleep(FREEZE_SETTLE_S)
        waited_until = time.monotonic() + TASK_WAIT_S
        while not caught and time.monotonic() < waited_until:
            caught = index in (busy_workers(cluster, settings, job) or set())
            time.sleep(0 if caught else 0.1)
    finally:
        if not caught:  # a frozen worker would stall every later test of the cluster
            for process in members:
                with contextlib.suppress(psutil.Error):
                    process.resume()
    return caught


def failed_tasks(settings: Settings, job: str) -> list[str]:
    """Why each failed task of the job's last application failed, from its event log (see
    RECOVERY_FAILURES)."""
    app = read_application(settings, job)
    assert app is not None, f"{job} recorded no application"
    folder = Path(event_log_dir(settings.lake)) / f"eventlog_v2_{app['app_id']}"
    reasons = []
    for part in sorted(folder.glob("events_*")):
        with pa.input_stream(str(part), compression="zstd") as stream:
            for line in stream.read().decode().splitlines():
                event = json.loads(line)
                if (event["Event"] == "SparkListenerTaskEnd"
                        and event["Task Info"]["Failed"]):
                    reasons.append(event["Task End Reason"]["Reason"])
    return reasons
