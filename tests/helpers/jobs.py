"""Run one streaming job with --available-now semantics in a test's SparkSession."""

from __future__ import annotations

from typing import Any

from spark_jobs.config import Settings
from spark_jobs.jobs.runner import start_job


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
