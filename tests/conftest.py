"""Shared fixtures: one embedded broker and one SparkSession per test session, lake in tmp."""

from __future__ import annotations

import itertools
import logging
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from spark_jobs.settings import KafkaSettings, Settings, load_settings

_counter = itertools.count()


def pytest_unconfigure(config: pytest.Config) -> None:
    """Detach the root logger's stream handlers bound to pytest's captured output.

    Airflow sets up logging when a test first imports it (the e-mail alert channel), with a
    handler on the stream that was sys.stdout then: pytest's capture file, closed after this
    hook. A record logged later, at interpreter exit (py4j's finalizers log), would end in
    "--- Logging error ---"; without the handler a warning still reaches the real stderr.
    """
    root = logging.getLogger()
    real = (sys.__stdout__, sys.__stderr__)
    for handler in list(root.handlers):
        if (isinstance(handler, logging.StreamHandler)
                and not isinstance(handler, logging.FileHandler)
                and handler.stream not in real):
            root.removeHandler(handler)


@pytest.fixture(scope="session")
def broker() -> Iterator[str]:
    """Bootstrap address of a Tansu broker started (and stopped) by the project's own code."""
    from spark_jobs.local.broker import EmbeddedBroker
    from spark_jobs.streaming.kafka.range_consumers import WORKER_CONSUMERS

    with EmbeddedBroker(port=0) as running:
        yield running.bootstrap
        WORKER_CONSUMERS.close()  # consumers read_range kept in this process, before the broker


@pytest.fixture
def kafka(broker: str, make_settings: Callable[..., Settings]) -> KafkaSettings:
    """Kafka settings of the session's broker."""
    return make_settings(broker).kafka


@pytest.fixture
def make_settings(tmp_path: Path) -> Callable[..., Settings]:
    """Settings with the lake under tmp_path; keyword `section={key: value}` overrides."""

    def build(bootstrap: str | None = None, **sections: dict[str, Any]) -> Settings:
        overrides: dict[str, Any] = {"lake": {"root": str(tmp_path / f"lake{next(_counter)}")}}
        if bootstrap:
            overrides["kafka"] = {"bootstrap": bootstrap}
        for section, values in sections.items():
            overrides.setdefault(section, {}).update(values)
        return load_settings(environ={}, overrides=overrides)

    return build


@pytest.fixture(scope="session")
def private_postgres():
    """A private PostgreSQL cluster started (and stopped) by the project's own code; make
    databases of a test's own on it with `helpers.postgres.new_database`."""
    from helpers.postgres import running_postgres

    with running_postgres() as settings:
        yield settings


@pytest.fixture(scope="session")
def spark():
    """One SparkSession for the whole test session (local[2], RocksDB state store)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from spark_jobs.streaming.spark_session import build_session

    session = build_session(load_settings(environ={}, overrides={"spark": {"master": "local[2]"}}))
    yield session
    session.stop()


# SIGTERM, then SIGKILL after this long: after a job ran against it, Tansu often outlived
# SIGTERM by the whole 5 s default (12 teardowns of exactly 5.0 s in the fraud and samples
# tiers alone)
OWN_BROKER_GRACE_S = 0.5


@pytest.fixture
def own_broker() -> Iterator[str]:
    """A broker of the test's own: the contract fixes topic names, so jobs' tests don't share."""
    from spark_jobs.local.broker import EmbeddedBroker
    from spark_jobs.streaming.kafka.range_consumers import WORKER_CONSUMERS

    with EmbeddedBroker(port=0) as running:
        yield running.bootstrap
        WORKER_CONSUMERS.close()  # consumers read_range kept in this process, before the broker
        running.stop(grace_s=OWN_BROKER_GRACE_S)  # memory storage: nothing to lose


@pytest.fixture
def run_now(spark) -> Callable[[Settings, str], Any]:
    """Run one job with --available-now semantics in the shared session; returns the query."""
    from helpers.jobs import run_available_now

    return lambda settings, job: run_available_now(spark, settings, job)


@pytest.fixture(scope="session")
def history_lake(spark, tmp_path_factory):
    """Three days of generated history through the three streaming jobs (built once per
    session; read it, or write to a `history.copy_history` copy). See tests/helpers/history.py."""
    from helpers.history import build_history_lake

    return build_history_lake(spark, tmp_path_factory.mktemp("history"))


@pytest.fixture(scope="session")
def recomputed_history_lake(spark, history_lake, tmp_path_factory):
    """A copy of `history_lake` with `batch_experiment_metrics` recomputed for its days
    (read it, or copy it with `history.copy_history` before writing)."""
    from helpers.history import recomputed_copy

    return recomputed_copy(spark, history_lake, tmp_path_factory.mktemp("recomputed"))
