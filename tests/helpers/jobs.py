"""Run one streaming job with --available-now semantics in a test's SparkSession."""

from __future__ import annotations

from typing import Any

from spark_jobs.settings import Settings
from spark_jobs.streaming.runner import start_job


def run_available_now(spark: Any, settings: Settings, job: str, timeout_s: float = 300) -> Any:
    """Start the job, wait for it to finish, close its sink; returns the ended query.

    Fails the test when the job is still running after `timeout_s` or ended with an error.
    """
    query, sink = start_job(spark, settings, job, available_now=True)
    try:
        query.awaitTermination(timeout=timeout_s)
    finally:
        close = getattr(sink, "close", None)
        if close:
            close()
    if query.isActive:
        query.stop()
        raise AssertionError(f"{job} did not finish within {timeout_s} s")
    if query.exception() is not None:
        raise AssertionError(f"{job} failed: {query.exception()}")
    return query


def kill_mid_stream(settings: Settings, job: str, after_batch: int, folder: Any,
                    timeout_s: float = 180) -> None:
    """Run `tideline job run JOB` as its own process with exactly these settings, wait until
    it reported batch `after_batch`, then SIGKILL its whole process group: a crash wherever
    it is (between a batch's outputs and its commit, say)."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from spark_jobs.control.submit import freeze_settings, frozen_environment
    from spark_jobs.streaming.progress import read_progress

    config = freeze_settings(settings, Path(folder) / f"{job}-killed.yaml")
    process = subprocess.Popen(
        [sys.executable, "-m", "spark_jobs.cli", "job", "run", job],
        env=frozen_environment(config, os.environ), start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + timeout_s
        while (read_progress(settings, job) or {}).get("batchId", -1) < after_batch:
            assert process.poll() is None, f"{job} died"
            assert time.monotonic() < deadline, f"{job} made no progress"
            time.sleep(0.2)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(30)
