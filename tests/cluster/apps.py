"""What the cluster tests do to the test cluster: run a `tideline` command as a Spark
application on it (a child process with exactly the given settings, as users run jobs), wait
for a job's progress, and lose a worker (SIGKILL its JVM and executors) for a new one."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from spark_jobs.cluster.daemons import kill_daemon, read_record
from spark_jobs.cluster.settings import ClusterSettings
from spark_jobs.cluster.standalone import start_worker, worker_name
from spark_jobs.control.submit import freeze_settings, frozen_environment
from spark_jobs.settings import Settings
from spark_jobs.streaming.progress import read_progress

APP_TIMEOUT_S = 600


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
