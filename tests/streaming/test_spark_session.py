"""The session's set-up: py4j's INFO chatter stays out unless asked for; the JVM's JIT."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from spark_jobs.settings import load_settings
from spark_jobs.streaming.spark_session import (
    CHANGELOG_CHECKPOINTING,
    JIT_OPTIONS,
    quiet_py4j,
    session_conf,
)


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


@pytest.mark.spark
def test_the_session_jvm_compiles_with_the_first_tier_only(spark):
    """The JIT at its first tier: the optimising compiler's work competed with the jobs' on
    two cores (spark_session.JIT_OPTIONS). The archive's options are added, not instead."""
    runtime = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    arguments = list(runtime.getInputArguments())
    assert set(JIT_OPTIONS.split()) <= set(arguments)
    assert spark.conf.get("spark.executor.extraJavaOptions") == JIT_OPTIONS


@pytest.mark.spark
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


@pytest.mark.spark
@pytest.mark.integration
def test_a_stateful_query_checkpoints_its_state_as_change_files(spark, tmp_path):
    """RocksDB's changelog checkpointing (spark_session.CHANGELOG_CHECKPOINTING): a state
    commit uploads the batch's changes, not a snapshot. A second run resumes from them and
    still remembers the first run's keys."""
    source, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    source.mkdir()
    rows: list[str] = []

    def run(lines: list[str], name: str) -> None:
        (source / name).write_text("\n".join(lines) + "\n")
        query = (spark.readStream.schema("id STRING").json(str(source))
                 .dropDuplicates(["id"]).writeStream
                 .foreachBatch(lambda frame, _: rows.extend(r.id for r in frame.collect()))
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        assert query.awaitTermination(120), "the query did not end in 120 s"
        assert query.exception() is None, query.exception()

    run(['{"id": "a"}', '{"id": "b"}'], "1.json")
    run(['{"id": "b"}', '{"id": "c"}'], "2.json")
    assert sorted(rows) == ["a", "b", "c"]
    assert spark.conf.get(CHANGELOG_CHECKPOINTING) == "true"
    changes = list((checkpoint / "state").rglob("*.changelog"))
    assert changes, sorted(p.name for p in (checkpoint / "state").rglob("*"))
