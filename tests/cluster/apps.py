"""What the cluster tests do to the test cluster: run a `tideline` command as a Spark
application on it (a child process with exactly the given settings, as users run jobs), wait
for a job's progress, and lose a worker (SIGKILL its JVM and executors) for a new one, when
it pleases or while its executor runs a task of the job."""

from __future__ import annotations

import contextlib
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


def busy_worker(cluster: ClusterSettings, settings: Settings, job: str) -> int | None:
    """The worker whose executor is running a task of the job right now (from the driver's
    REST API; a standalone worker keeps each executor's folder `<work>/<app>/<executor>`)."""
    app = read_application(settings, job)
    if app is None:
        return None
    try:
        executors = httpx.get(f"{app['ui']}/api/v1/applications/{app['app_id']}/executors",
                              timeout=10).json()
    except (httpx.HTTPError, ValueError):
        return None
    work = Path(cluster.home) / "work"
    for executor in executors:
        if executor["id"] != "driver" and executor["isActive"] and executor["activeTasks"]:
            for index in range(1, cluster.workers + 1):
                if (work / worker_name(index) / app["app_id"] / executor["id"]).is_dir():
                    return index
    return None


def lose_busy_worker(cluster: ClusterSettings, settings: Settings, job: str,
                     timeout_s: float = 120) -> int:
    """lose_worker() a worker while its executor runs a task of the job: that task is lost
    with it and must be retried elsewhere. Returns the worker's index.

    A task seen running may end before the kill lands (tasks of a small batch take
    milliseconds), so the worker's whole session is frozen (SIGSTOP) first and killed only if
    the driver, given time for any status update already sent, still counts a task running
    there; otherwise it is thawed and the search goes on."""
    deadline = time.monotonic() + timeout_s
    while True:
        assert time.monotonic() < deadline, f"no task of {job} caught running"
        index = busy_worker(cluster, settings, job)
        if index is not None and _caught_running(cluster, settings, job, index):
            lose_worker(cluster, index)
            return index
        time.sleep(0.05)


def _caught_running(cluster: ClusterSettings, settings: Settings, job: str, index: int
                    ) -> bool:
    """Freeze worker `index`'s session; True (left frozen) if a task of the job still runs
    there in the driver's view a moment later, else thaw it and say False."""
    record = read_record(Path(cluster.home), worker_name(index))
    assert record is not None, f"worker {index} was never started"
    members = daemon_session(record)
    for process in members:
        with contextlib.suppress(psutil.Error):
            process.suspend()
    time.sleep(FREEZE_SETTLE_S)
    if busy_worker(cluster, settings, job) == index:
        return True
    for process in members:
        with contextlib.suppress(psutil.Error):
            process.resume()
    return False


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
