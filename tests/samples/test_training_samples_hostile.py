"""training_samples through the broker and Spark on hostile input (CONTRACTS section 9): a
burst of every hostile kind, a clock ten years ahead included, in one run; normal traffic in
the next. The samples equal the batch recomputation of the normal traffic alone, the shadow
check agrees on the topics as they are, and every hostile record is a dead letter with its
reason and the bytes received."""

from __future__ import annotations

import datetime
import json

import pytest
from helpers.hostile import hostile_messages

from spark_jobs.contracts.tables import TABLE_DEAD_LETTERS, TABLE_TRAINING_SAMPLES
from spark_jobs.contracts.topics import TOPIC_ENGAGEMENTS, TOPIC_VIEWS
from spark_jobs.streaming.drops import take_batch
from spark_jobs.streaming.kafka.producer import make_producer, produce_all
from spark_jobs.streaming.lake.delta import read_arrow

pytestmark = [pytest.mark.integration, pytest.mark.spark]

JOB = "training_samples"
T0 = 1_767_225_600_000  # 2026-01-01
T1 = T0 + 3_600_000  # normal traffic, an hour later
MAX_BYTES = 4_096  # jobs.max_message_bytes here: the huge message stays producible
VIEW = {"view_id": "h1", "user_id": 42, "post_id": 7, "ts": T0, "surface": "feed",
        "score": 0.5}
ENGAGEMENT = {"user_id": 42, "post_id": 7, "view_id": "h1", "signal": "like", "ts": T0 + 5}
SIGNALS = ("like", "share", "comment", "favorite", "play", "skip")


def _hostile() -> dict[str, list[tuple[str, bytes | None, str]]]:
    return {
        TOPIC_VIEWS: hostile_messages(VIEW, int_field="post_id", string_field="surface",
                                      time_field="ts", number_field="score",
                                      max_message_bytes=MAX_BYTES),
        TOPIC_ENGAGEMENTS: hostile_messages(ENGAGEMENT, int_field="user_id",
                                            string_field="view_id", time_field="ts",
                                            max_message_bytes=MAX_BYTES),
    }


def _normal() -> dict[str, list[dict]]:
    views = [
        {"view_id": "a1", "user_id": 1, "post_id": 10, "ts": T1, "surface": "feed"},
        {"view_id": "a2", "user_id": 2, "post_id": 20, "ts": T1 + 5_000, "lang": "hi"},
        {"view_id": "a3", "user_id": 42, "post_id": 7, "ts": T1 + 10_000, "rank": 3},
        {"view_id": "a1", "user_id": 1, "post_id": 10, "ts": T1 + 1, "surface": "again"},
        # closes every window of the day; itself a view of the next day
        {"view_id": "clock", "user_id": 3, "post_id": 30, "ts": T0 + 86_400_000 + T1 - T0},
    ]
    engagements = [
        {"user_id": 1, "post_id": 10, "view_id": "a1", "signal": "like", "ts": T1 + 1_000},
        {"user_id": 1, "post_id": 10, "view_id": None, "signal": "share", "ts": T1 + 2_000},
        {"user_id": 2, "post_id": 20, "view_id": "a2", "signal": "comment", "ts": T1 + 6_000},
        {"user_id": 42, "post_id": 7, "view_id": None, "signal": "play", "ts": T1 + 20_000},
    ]
    return {TOPIC_VIEWS: views, TOPIC_ENGAGEMENTS: engagements}


def _produce(kafka, topic: str, keys: list[str], values: list[bytes | None],
             timestamps: list[int]) -> None:
    producer = make_producer(kafka)
    produce_all(producer, topic, keys, values, timestamps)
    producer.flush(30)


def _canonical(samples: list[dict]) -> list[tuple]:
    return sorted((s["sample_id"], s["user_id"], s["post_id"], s["ts"],
                   json.loads(s["context"]), tuple(s["labels"].items())) for s in samples)


def test_a_hostile_burst_then_normal_traffic(own_broker, make_settings, run_now, spark):
    from spark_jobs.catalog import system_topics
    from spark_jobs.samples.shadow.recompute import recompute_samples
    from spark_jobs.samples.shadow.run import compare_day
    from spark_jobs.streaming.kafka.topic_admin import ensure_topics

    settings = make_settings(own_broker, jobs={"max_message_bytes": MAX_BYTES})
    kafka = settings.kafka
    ensure_topics(kafka, system_topics("samples"), 1)
    take_batch(JOB, 2**62)  # forget counts another test's sink left in this process

    hostile = _hostile()
    for topic, messages in hostile.items():  # one partition: offset = position
        _produce(kafka, topic, ["42"] * len(messages), [m[1] for m in messages],
                 [T0] * len(messages))
    run_now(settings, JOB)
    burst_drops = take_batch(JOB, 2**62)

    normal = _normal()
    for topic, records in normal.items():
        _produce(kafka, topic, [str(r["user_id"]) for r in records],
                 [json.dumps(r).encode() for r in records], [r["ts"] for r in records])
    run_now(settings, JOB)

    stored = read_arrow(settings.lake.table(TABLE_TRAINING_SAMPLES)).to_pylist()
    views = spark.createDataFrame(
        [(json.dumps(r), 0, i) for i, r in enumerate(normal[TOPIC_VIEWS])],
        "value string, kafka_partition int, kafka_offset long")
    engagements = spark.createDataFrame(
        [(json.dumps(r), 0, i) for i, r in enumerate(normal[TOPIC_ENGAGEMENTS])],
        "value string, kafka_partition int, kafka_offset long")
    reference = [row.asDict(recursive=True) for row in recompute_samples(
        views, engagements, settings.samples.window_ms, SIGNALS).collect()
        if row.view_id != "clock"]  # its window is still open
    assert _canonical(stored) == _canonical(reference)
    assert {s["sample_id"]: [k for k, v in s["labels"].items() if v] for s in stored} == {
        "a1": ["like", "share"], "a2": ["comment"], "a3": ["play"]}
    report = compare_day(spark, settings, datetime.date(2026, 1, 1))
    assert report.agrees and report.batch_samples == 3, report.as_dict()

    dead = read_arrow(settings.lake.table(TABLE_DEAD_LETTERS)).to_pylist()
    got = sorted((d["topic"], d["offset"], d["reason"], d["raw_bytes"], d["raw_length"])
                 for d in dead)
    expected = sorted((topic, offset, reason, value, None if value is None else len(value))
                      for topic, messages in hostile.items()
                      for offset, (_, value, reason) in enumerate(messages))
    assert got == expected, "each hostile record once, with its reason and the bytes received"
    assert all(d["detail"] for d in dead), "every dead letter says why"
    future = [d["detail"] for d in dead if d["reason"] == "future"]
    assert len(future) == 2 and all("ahead of its Kafka timestamp" in d for d in future)
    assert burst_drops == {"malformed": len(expected) - 2, "future": 2}
    assert take_batch(JOB, 2**62) == {"duplicate_view": 1}
