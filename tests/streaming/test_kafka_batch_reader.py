"""Batch reads of the tideline_kafka source against the embedded broker: whole topics, bounds."""

from __future__ import annotations

import json
import uuid

import pytest

from spark_jobs.settings import KafkaSettings
from spark_jobs.streaming.kafka.batch_reader import (
    TimeBounds,
    batch_options,
    offsets_for_time,
    plan_ranges,
)
from spark_jobs.streaming.kafka.options import SOURCE_NAME, SourceOptionError
from spark_jobs.streaming.kafka.producer import make_producer, produce_all
from spark_jobs.streaming.kafka.source import read_topic_batch
from spark_jobs.streaming.kafka.source_schema import source_schema
from spark_jobs.streaming.kafka.topic_admin import beginning_offsets, end_offsets, ensure_topics

BASE_TS = 1_767_225_600_000
pytestmark = [pytest.mark.integration, pytest.mark.kafka]


def _topic(kafka: KafkaSettings, partitions: int) -> str:
    name = f"batch-{uuid.uuid4().hex[:10]}"
    ensure_topics(kafka, [name], partitions)
    return name


def _produce(kafka: KafkaSettings, topic: str, count: int) -> dict[str, tuple[str, int]]:
    """Records n = 0..count-1, key n % 4 (both partitions), Kafka time BASE_TS + 10 n."""
    values = [json.dumps({"user_id": n, "event_type": "click", "ts": BASE_TS + n})
              for n in range(count)]
    keys = [str(n % 4) for n in range(count)]
    stamps = [BASE_TS + 10 * n for n in range(count)]
    produce_all(make_producer(kafka), topic, keys, values, stamps)
    return {v: (k, t) for v, k, t in zip(values, keys, stamps, strict=True)}


def test_options_are_validated() -> None:
    good = {"bootstrap": "h:1", "topic": "t"}
    assert batch_options(good)[1] == TimeBounds()
    assert batch_options({**good, "startingTimestamp": "5", "endingTimestamp": "9"})[1] == (
        TimeBounds(5, 9)
    )
    for bad, message in [
        ({**good, "startingOffsets": "latest"}, "streaming queries only"),
        ({**good, "startingTimestamp": "-1"}, "epoch ms"),
        ({**good, "endingTimestamp": "soon"}, "epoch ms"),
        ({**good, "startingTimestamp": "9", "endingTimestamp": "5"}, "before"),
    ]:
        with pytest.raises(SourceOptionError, match=message):
            batch_options(bad)


def test_offsets_for_time_and_planned_ranges(kafka: KafkaSettings) -> None:
    topic = _topic(kafka, 1)
    _produce(kafka, topic, 20)  # one partition: offset n has time BASE_TS + 10 n
    produce_all(make_producer(kafka), topic, ["k"], ["late"], [BASE_TS + 5])  # offset 20
    begins, ends = beginning_offsets(kafka, topic), end_offsets(kafka, topic)
    assert ends == {0: 21}
    for ms, expected in [
        (0, 0), (BASE_TS, 0), (BASE_TS + 1, 1), (BASE_TS + 50, 5), (BASE_TS + 51, 6),
        (BASE_TS + 190, 19), (BASE_TS + 191, 21), (BASE_TS + 10_000, 21),
    ]:
        assert offsets_for_time(kafka, topic, ms, begins, ends) == {0: expected}, ms
    options = batch_options({"bootstrap": kafka.bootstrap, "topic": topic})[0]
    ranges = plan_ranges(options, TimeBounds(BASE_TS + 45, BASE_TS + 100))
    assert [(r.topic, r.partition, r.start, r.end) for r in ranges] == [(topic, 0, 5, 10)]
    assert plan_ranges(options, TimeBounds(BASE_TS + 500, None)) == []


@pytest.mark.spark
def test_reads_every_partition_to_its_end(spark, kafka: KafkaSettings) -> None:
    topic = _topic(kafka, 2)
    produced = _produce(kafka, topic, 30)
    df = read_topic_batch(spark, kafka, topic)
    assert df.schema == source_schema(None)
    assert df.rdd.getNumPartitions() == 2  # one task per Kafka partition
    rows = df.collect()
    assert sorted(row.value.decode() for row in rows) == sorted(produced)
    ends = end_offsets(kafka, topic)
    for partition in (0, 1):
        offsets = sorted(r.kafka_offset for r in rows if r.kafka_partition == partition)
        assert offsets == list(range(ends[partition]))
    for row in rows:
        key, stamp = produced[row.value.decode()]
        assert (row.kafka_key, row.kafka_topic, row.kafka_timestamp) == (key, topic, stamp)

    # Bounded by Kafka time, through the plain format/options API.
    bounded = (
        spark.read.format(SOURCE_NAME)
        .options(bootstrap=kafka.bootstrap, topic=topic)
        .option("startingTimestamp", BASE_TS + 100)
        .option("endingTimestamp", BASE_TS + 200)
        .load()
        .select("kafka_timestamp")
    )
    stamps = sorted(r.kafka_timestamp for r in bounded.collect())
    assert stamps == [BASE_TS + 10 * n for n in range(10, 20)]


@pytest.mark.spark
def test_decoded_records_and_empty_topic(spark, kafka: KafkaSettings) -> None:
    topic = _topic(kafka, 2)
    empty = read_topic_batch(spark, kafka, topic, record="events")
    assert empty.count() == 0
    _produce(kafka, topic, 6)
    produce_all(make_producer(kafka), topic, ["x"], ["{nope"], [BASE_TS])
    rows = read_topic_batch(spark, kafka, topic, record="events").collect()
    assert sorted(r.user_id for r in rows if r.error is None) == list(range(6))
    assert [r.raw_value for r in rows if r.error is not None] == ["{nope"]
