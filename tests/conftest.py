"""Shared fixtures: one embedded broker and one SparkSession per test session, lake in tmp."""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from spark_jobs.config import Settings, load_settings

_counter = itertools.count()


@pytest.fixture(scope="session")
def broker() -> Iterator[str]:
    """Bootstrap address of a Tansu broker started (and stopped) by the project's own code."""
    from spark_jobs.broker import EmbeddedBroker

    with EmbeddedBroker(port=0) as running:
        yield running.bootstrap


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
def spark():
    """One SparkSession for the whole test session (local[2], RocksDB state store)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from spark_jobs.spark_session import build_session

    session = build_session(load_settings(environ={}, overrides={"spark": {"master": "local[2]"}}))
    yield session
    session.stop()
