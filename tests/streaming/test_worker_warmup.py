"""The Python daemons started ahead of a job's first batch (streaming/worker_warmup.py)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from spark_jobs.streaming import worker_warmup
from spark_jobs.streaming.worker_warmup import ARROW, ROWS, STATE, run_warm_up, start_warm_up


class _BrokenContext:
    applicationId = "app-broken"

    def setLocalProperty(self, key: str, value: Any) -> None:
        pass


class _BrokenSession:
    """A session whose every job fails, as one being stopped does."""

    sparkContext = _BrokenContext()

    def range(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the session is stopped")


def test_a_failed_warm_up_is_logged_and_never_raises(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger=worker_warmup.__name__):
        thread = start_warm_up(_BrokenSession(), [ARROW, STATE])  # type: ignore[arg-type]
        assert thread is not None
        thread.join(10)
    assert not thread.is_alive()
    failures = [r.getMessage() for r in caplog.records if "failed" in r.getMessage()]
    assert len(failures) == 2 and "the session is stopped" in failures[0]


def test_each_kind_is_warmed_once_per_application() -> None:
    session = _BrokenSession()
    session.sparkContext = type("Ctx", (_BrokenContext,), {"applicationId": "app-once"})()
    first = start_warm_up(session, [ARROW])  # type: ignore[arg-type]
    assert first is not None
    first.join(10)
    assert start_warm_up(session, [ARROW]) is None  # type: ignore[arg-type]
    second = start_warm_up(session, [ARROW, STATE])  # type: ignore[arg-type]
    assert second is not None  # STATE is still to do
    second.join(10)
    assert start_warm_up(session, [STATE, ARROW]) is None  # type: ignore[arg-type]


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown warm-up"):
        run_warm_up(_BrokenSession(), "gpu")  # type: ignore[arg-type]


@pytest.mark.spark
def test_each_warm_up_runs_its_job_and_leaves_no_description(spark: Any) -> None:
    """A real tiny job of each kind: every row back, and the job's description is not left
    on the thread for what it runs next."""
    assert run_warm_up(spark, ARROW) == ROWS
    assert run_warm_up(spark, STATE) == 2  # one row per key
    assert spark.sparkContext.getLocalProperty("spark.job.description") is None
