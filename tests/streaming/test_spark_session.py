"""The session's set-up: py4j's INFO chatter stays out unless asked for; the JVM's JIT."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from spark_jobs.settings import load_settings
from spark_jobs.streaming.spark_session import JIT_OPTIONS, quiet_py4j, session_conf


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


def test_the_session_jvm_compiles_with_the_first_tier_only(spark):
    """The JIT at its first tier: the optimising compiler's work competed with the jobs' on
    two cores (spark_session.JIT_OPTIONS). The archive's options are added, not instead."""
    runtime = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    arguments = list(runtime.getInputArguments())
    assert set(JIT_OPTIONS.split()) <= set(arguments)
    assert spark.conf.get("spark.executor.extraJavaOptions") == JIT_OPTIONS


def test_the_session_jvm_has_room_for_compiled_code(spark):
    """At the first tier alone the JVM reserves 48 MB for compiled code; several queries in
    one JVM (the demo, the pipeline, a test session) filled it and the JIT stopped until
    methods were thrown out, new code interpreted meanwhile (BENCHMARKS.md, thirteenth
    session)."""
    management = spark.sparkContext._jvm.java.lang.management.ManagementFactory
    reserved = sum(pool.getUsage().getMax() for pool in management.getMemoryPoolMXBeans()
                   if str(pool.getName()).startswith(("CodeHeap", "CodeCache")))
    assert reserved >= 240 * 1024 * 1024


def test_java_options_of_ones_own_replace_the_jit_default():
    settings = load_settings(environ={}, overrides={"spark": {"conf": {
        "spark.driver.extraJavaOptions": "-Dmine=1"}}})
    conf = session_conf(settings)
    assert JIT_OPTIONS not in conf["spark.driver.extraJavaOptions"]
    assert conf["spark.driver.extraJavaOptions"].startswith("-Dmine=1")
    assert conf["spark.executor.extraJavaOptions"] == JIT_OPTIONS
