"""The Python daemons started ahead of a job's first batch (streaming/worker_warmup.py)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest

from spark_jobs.settings import Settings
from spark_jobs.streaming import runner, worker_warmup
from spark_jobs.streaming.worker_warmup import (
    ARROW,
    GROUP,
    STATE,
    run_warm_up,
    start_warm_up,
    warm_up_job,
)


@pytest.fixture(autouse=True)
def nothing_warmed_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts from an application that warmed nothing (the set is per process)."""
    monkeypatch.setattr(worker_warmup, "_warmed", set())


class _Context:
    defaultParallelism = 2

    def __init__(self, application: str) -> None:
        self.applicationId = application

    def setLocalProperty(self, key: str, value: Any) -> None:
        pass


class _Session:
    """A session whose jobs fail (as a stopped one's do), or wait for `release`."""

    def __init__(self, application: str = "app-1", release: threading.Event | None = None
                 ) -> None:
        self.sparkContext = _Context(application)
        self.release = release
        self.ranges = 0

    def range(self, *args: Any, **kwargs: Any) -> Any:
        self.ranges += 1
        if self.release is not None:
            self.release.wait(10)
        raise RuntimeError("the session is stopped")


def test_a_failed_warm_up_is_logged_and_never_raises(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger=worker_warmup.__name__):
        thread = start_warm_up(_Session(), [ARROW, STATE])  # type: ignore[arg-type]
        assert thread is not None
        thread.join(10)
    assert not thread.is_alive()
    failures = [r.getMessage() for r in caplog.records if "failed" in r.getMessage()]
    assert len(failures) == 2 and "the session is stopped" in failures[0]


def test_a_warm_up_that_cannot_start_does_not_raise(caplog: pytest.LogCaptureFixture) -> None:
    class NoApplication:
        @property
        def sparkContext(self) -> Any:
            raise RuntimeError("no context")

    with caplog.at_level(logging.INFO, logger=worker_warmup.__name__):
        assert start_warm_up(NoApplication(), [ARROW]) is None  # type: ignore[arg-type]
    assert any("no context" in r.getMessage() for r in caplog.records)


def test_the_warm_up_runs_in_a_daemon_thread_and_returns_at_once() -> None:
    release = threading.Event()
    session = _Session(release=release)
    thread = start_warm_up(session, [ARROW])  # type: ignore[arg-type]
    try:
        assert thread is not None and thread.daemon  # never holds the process at exit
        assert thread.is_alive()  # its job still runs: the caller did not wait for it
    finally:
        release.set()
    thread.join(10)
    assert session.ranges == 1


def test_kinds_are_warmed_in_order_once_per_application() -> None:
    session = _Session("app-once")
    seen: list[str] = []
    original = worker_warmup.run_warm_up
    try:
        worker_warmup.run_warm_up = lambda spark, kind: seen.append(kind)  # type: ignore[assignment]
        for kinds in ([ARROW], [ARROW], [ARROW, STATE], [STATE, ARROW]):
            thread = start_warm_up(session, kinds)  # type: ignore[arg-type]
            if thread is not None:
                thread.join(10)
        other = start_warm_up(_Session("app-other"), [STATE, ARROW])  # type: ignore[arg-type]
        assert other is not None
        other.join(10)
    finally:
        worker_warmup.run_warm_up = original
    assert seen == [ARROW, STATE, STATE, ARROW]


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown warm-up"):
        warm_up_job(_Session(), "gpu")  # type: ignore[arg-type]


@pytest.mark.spark
def test_each_warm_up_runs_a_spark_job_of_its_kind(spark: Any) -> None:
    """A real job per kind, in the warm-up's group (and no longer once it ended): the plain
    kind maps Arrow batches in Python, the state kind runs a transformWithState."""
    plans = {kind: warm_up_job(spark, kind)._jdf.queryExecution().logical().toString()
             for kind in (ARROW, STATE)}
    assert "MapInArrow" in plans[ARROW] and "TransformWithState" not in plans[ARROW]
    assert "TransformWithState" in plans[STATE]
    tracker = spark.sparkContext.statusTracker()
    tasks = max(2, spark.sparkContext.defaultParallelism)
    for kind, rows in ((ARROW, 2 * tasks), (STATE, tasks)):
        before = len(tracker.getJobIdsForGroup(GROUP))
        assert run_warm_up(spark, kind) == rows
        assert len(tracker.getJobIdsForGroup(GROUP)) > before, kind
    for name in worker_warmup.PROPERTIES:
        assert spark.sparkContext.getLocalProperty(name) is None


@pytest.mark.spark
def test_start_job_warms_the_daemons_its_job_names(
    spark: Any, broker: str, make_settings: Callable[..., Settings],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The runner hands start_warm_up what the job module names, before the query starts."""
    from helpers.jobs import run_available_now

    calls: list[tuple[Any, tuple[str, ...]]] = []
    monkeypatch.setattr(runner, "start_warm_up",
                        lambda session, kinds: calls.append((session, tuple(kinds))))
    run_available_now(spark, make_settings(broker), "training_samples")
    assert calls == [(spark, (ARROW, STATE))]
