"""The template every system's job is built on, without Spark running: catalog modules with
`build` and `sink`, the processor base (rows of one schema, dead letters, one timer) and the
sink base (a replayed batch still runs its plan, then is skipped)."""

from __future__ import annotations

import importlib
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from spark_jobs.catalog import JOBS
from spark_jobs.streaming.batch_outputs import BatchSink
from spark_jobs.streaming.lake.dead_letters import (
    DEAD_LETTER_SCHEMA,
    DeadLetter,
    KafkaOrigin,
    dead_letter_table,
)
from spark_jobs.streaming.processor import KeyedProcessor, keep_one_timer

SCHEMA = StructType([
    StructField("kind", StringType(), False), StructField("user_id", LongType()),
    StructField("topic", StringType()), StructField("partition", IntegerType()),
    StructField("offset", LongType()), StructField("kafka_timestamp", LongType()),
    StructField("key", StringType()), StructField("raw_value", StringType()),
    StructField("reason", StringType()), StructField("detail", StringType()),
    StructField("dropped", LongType()),
])


class FakeHandle:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def registerTimer(self, ms: int) -> None:
        self.calls.append(("register", ms))

    def deleteTimer(self, ms: int) -> None:
        self.calls.append(("delete", ms))


def source_row(**fields: Any) -> SimpleNamespace:
    base = dict(kafka_topic="events", kafka_partition=1, kafka_offset=7, kafka_timestamp=99,
                kafka_key="42", error=None, raw_value=None, user_id=42)
    return SimpleNamespace(**{**base, **fields})


def test_every_catalog_job_module_provides_build_and_sink():
    for job in JOBS:
        module = importlib.import_module(job.module)
        assert callable(module.build) and callable(module.sink), job.name


def test_every_catalog_job_module_names_the_python_daemons_it_needs():
    from spark_jobs.settings import load_settings
    from spark_jobs.streaming.worker_warmup import ARROW, STATE

    settings = load_settings(environ={})
    expected = {  # what each query runs in Python workers (streaming/worker_warmup.py)
        "filter_events": (ARROW,), "filter_activations": (ARROW,),
        "experiment_metrics": (ARROW,), "training_samples": (ARROW, STATE),
        "fraud_rules": () if settings.fraud.state == "driver" else (STATE,),
    }
    assert {job.name for job in JOBS} == set(expected)
    for job in JOBS:
        assert importlib.import_module(job.module).python_daemons(settings) == expected[
            job.name], job.name
    fraud = importlib.import_module("spark_jobs.fraud.jobs.fraud_rules")
    spark_mode = load_settings(environ={}, overrides={"fraud": {"state": "spark"}})
    assert fraud.python_daemons(spark_mode) == (STATE,)
    assert fraud.python_daemons(load_settings(environ={}, overrides={
        "fraud": {"state": "driver"}})) == ()


def test_the_key_keeps_one_timer_and_an_expired_one_is_not_deleted():
    handle = FakeHandle()
    keep_one_timer(handle, [100, 500], 900, watermark_ms=200)
    assert handle.calls == [("delete", 500), ("register", 900)]
    handle = FakeHandle()
    keep_one_timer(handle, [900], 900, watermark_ms=200)
    keep_one_timer(handle, [], None, watermark_ms=200)
    assert handle.calls == []


def test_dead_letter_rows_have_one_shape_whatever_made_them():
    processor = KeyedProcessor(SCHEMA)
    undecodable = processor.undecodable(source_row(error="not valid JSON", raw_value="{x"))
    late = processor.late(source_row(), '{"user_id":42}')
    assert undecodable.asDict() == {
        "kind": "dead", "user_id": None, "topic": "events", "partition": 1, "offset": 7,
        "kafka_timestamp": 99, "key": "42", "raw_value": "{x", "reason": "malformed",
        "detail": "not valid JSON", "dropped": None}
    assert (late.reason, late.raw_value, late.offset) == ("late", '{"user_id":42}', 7)
    assert list(late.asDict()) == SCHEMA.fieldNames()
    letter = DeadLetter("malformed", None, KafkaOrigin.of(source_row()))
    assert processor.dead_letter(letter) == processor.dead(source_row(), "malformed", None)
    unkeyed = list(processor.unkeyed([source_row(user_id=None, error="no user", raw_value="r")]))
    assert [(r.kind, r.reason, r.detail, r.raw_value) for r in unkeyed] == [
        ("dead", "malformed", "no user", "r")]


def test_dead_rows_become_the_table_with_the_job_name():
    rows = pa.table({"kind": ["dead"], "topic": ["events"], "partition": [0], "offset": [3],
                     "kafka_timestamp": [5], "key": [None], "raw_value": ["x"],
                     "reason": ["late"], "detail": [None], "shard": [1]})
    at = datetime(2026, 1, 1, tzinfo=UTC)
    table = dead_letter_table("filter_events", rows, recorded_at=at)
    assert table.schema == DEAD_LETTER_SCHEMA
    assert table.to_pylist() == [{
        "job": "filter_events", "topic": "events", "partition": 0, "offset": 3,
        "kafka_timestamp": 5, "key": None, "raw_value": "x", "reason": "late",
        "recorded_at": at, "detail": None, "raw_bytes": b"x", "raw_length": 1}]


def test_dead_rows_keep_the_bytes_as_received_when_the_sink_reads_them_back():
    """A processor's row carries the record as decoded; the table gets the received bytes,
    cut at 64 KiB with the full length, and the decoded text where Kafka no longer has it."""
    big = b'{"pad": "' + b"\xff" * 70_000 + b'"}'
    rows = pa.table({"topic": ["t", "t"], "partition": [0, 0], "offset": [3, 4],
                     "kafka_timestamp": [5, 5], "key": [None, None],
                     "raw_value": ["decoded-3", "decoded-4"], "reason": ["late", "future"],
                     "detail": [None, "ahead"]})
    asked: list[list[tuple[str, int, int]]] = []

    def lookup(places: list[tuple[str, int, int]]) -> dict[tuple[str, int, int], bytes | None]:
        asked.append(places)
        return {("t", 0, 3): big}

    table = dead_letter_table("fraud_rules", rows, raw_lookup=lookup).to_pylist()
    assert asked == [[("t", 0, 3), ("t", 0, 4)]]
    assert table[0]["raw_bytes"] == big[:64 << 10] and table[0]["raw_length"] == len(big)
    assert table[0]["raw_value"].startswith('{"pad": "\ufffd')
    assert (table[1]["raw_bytes"], table[1]["raw_value"]) == (b"decoded-4", "decoded-4")
    assert (table[1]["reason"], table[1]["detail"]) == ("future", "ahead")


class RecordingSink(BatchSink[pa.Table]):
    marker = "raw_events"

    def __init__(self, settings: Any, done: bool) -> None:
        super().__init__(settings, "filter_events")
        self.done = done
        self.steps: list[str] = []
        self.outputs.committed = lambda table, batch_id: self.done  # type: ignore[method-assign]
        self.outputs.dead_letters = lambda dead, batch_id, *_: self.steps.append(  # type: ignore
            f"dead {dead.num_rows}")
        self.outputs.maybe_compact = lambda batch_id, tables, background: self.steps.append(  # type: ignore
            f"compact {','.join(tables)}")

    def publish(self, table: pa.Table) -> None:
        self.steps.append("publish")

    def commit(self, table: pa.Table, batch_id: int) -> None:
        self.steps.append("commit")


class Batch:
    def __init__(self) -> None:
        self.ran = False

    def toArrow(self) -> pa.Table:
        self.ran = True
        return pa.table({"kind": ["ok", "dead"], "topic": ["t", "t"], "partition": [0, 0],
                         "offset": [1, 2], "kafka_timestamp": [0, 0], "key": [None, None],
                         "raw_value": [None, "x"], "reason": [None, "bad"]})


def test_a_sink_runs_the_plan_of_a_replayed_batch_then_skips_it(make_settings):
    replayed, batch = RecordingSink(make_settings(), done=True), Batch()
    replayed(batch, 3)
    assert batch.ran and replayed.steps == []
    fresh = RecordingSink(make_settings(), done=False)
    fresh(Batch(), 4)
    assert fresh.steps == ["publish", "dead 1", "commit", "compact raw_events,dead_letters"]
