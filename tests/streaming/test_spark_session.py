"""The session's logging set-up: py4j's INFO chatter stays out unless asked for."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from spark_jobs.streaming.spark_session import quiet_py4j


@pytest.fixture
def py4j_logger() -> Iterator[logging.Logger]:
    logger = logging.getLogger("py4j")
    before = logger.level
    yield logger
    logger.setLevel(before)


def test_py4j_logs_warnings_only_by_default(py4j_logger: logging.Logger):
    """Its INFO lines (one per JVM call into Python, more from finalizers at exit, when the
    streams of the handlers may be closed) are not logged; its warnings are."""
    py4j_logger.setLevel(logging.NOTSET)
    quiet_py4j()
    assert not logging.getLogger("py4j.clientserver").isEnabledFor(logging.INFO)
    assert logging.getLogger("py4j.clientserver").isEnabledFor(logging.WARNING)


def test_a_py4j_level_someone_configured_is_kept(py4j_logger: logging.Logger):
    py4j_logger.setLevel(logging.DEBUG)
    quiet_py4j()
    assert py4j_logger.level == logging.DEBUG
