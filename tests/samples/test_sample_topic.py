"""A sample the broker refuses does not stop training_samples (CONTRACTS section 9): it
becomes an `error` dead letter holding the refused message, the others are published."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from spark_jobs.contracts.topics import TOPIC_TRAINING_SAMPLES
from spark_jobs.samples.encoding.sample_avro import decode_sample
from spark_jobs.samples.jobs.sample_topic import publish_samples
from spark_jobs.samples.jobs.training_samples import TrainingSamplesSink
from spark_jobs.samples.processors.join_processor import output_schema
from spark_jobs.streaming.kafka.producer import KafkaDeliveryError, make_producer
from spark_jobs.streaming.kafka.topic_admin import ensure_topics
from spark_jobs.streaming.kafka.topic_reader import read_all

pytestmark = pytest.mark.kafka

SIGNALS = ("like", "share", "comment", "favorite", "play", "skip")
LIMIT = 1_000  # the smallest message.max.bytes librdkafka accepts


def test_a_refused_message_is_reported_and_the_others_are_delivered(own_broker, make_settings):
    kafka = make_settings(own_broker).kafka
    ensure_topics(kafka, ["refusals"], 1)
    producer = make_producer(kafka, **{"message.max.bytes": LIMIT})
    values = [b"small", b"x" * (2 * LIMIT), b"also small"]
    refused = publish_samples(producer, "refusals", ["1", "2", "3"], values)
    assert [(index, "MSG_SIZE_TOO_LARGE" in error) for index, error in refused] == [(1, True)]
    assert [m.value for m in read_all(kafka, "refusals")] == [b"small", b"also small"]


def test_a_failure_that_is_not_a_refusal_still_raises(make_settings):
    kafka = make_settings("127.0.0.1:9").kafka  # nothing listens: nothing can be delivered
    producer = make_producer(kafka, **{"message.timeout.ms": 300})
    with pytest.raises(KafkaDeliveryError, match="1 record"):
        publish_samples(producer, "anywhere", ["1"], [b"lost"])


def _sample_row(view_id: str, user: int, offset: int, context: str) -> dict:
    return {"kind": "sample", "sample_id": view_id, "view_id": view_id, "user_id": user,
            "post_id": 7, "ts": 1_000 + offset, "context": context,
            "labels": dict.fromkeys(SIGNALS, 0), "topic": "views", "partition": 0,
            "offset": offset, "kafka_timestamp": 1_000, "key": str(user)}


def test_the_sink_dead_letters_a_refused_sample_and_publishes_the_rest(own_broker,
                                                                        make_settings):
    settings = make_settings(own_broker, kafka={"client": {"message.max.bytes": LIMIT}})
    ensure_topics(settings.kafka, [TOPIC_TRAINING_SAMPLES], 1)
    schema = to_arrow_schema(output_schema(SIGNALS))
    rows = [_sample_row("v1", 1, 10, "{}"), _sample_row("v2", 2, 11, '{"p":"' + "x" * 2000 + '"}'),
            {"kind": "dead", "topic": "views", "partition": 0, "offset": 12, "reason": "late",
             "raw_value": "late view"}]
    sink = TrainingSamplesSink(settings)
    collected = sink.batch_of(pa.Table.from_pylist(rows, schema))
    sink.publish(collected)
    sink.close()

    published = [decode_sample(m.value)["sample_id"]
                 for m in read_all(settings.kafka, TOPIC_TRAINING_SAMPLES)]
    assert published == ["v1"]
    dead = sink.dead_rows(collected).to_pylist()
    assert [(d["topic"], d["offset"], d["reason"], d["key"]) for d in dead] == [
        ("views", 12, "late", None), (TOPIC_TRAINING_SAMPLES, None, "error", "2")]
    refused = dead[1]
    assert decode_sample(refused["raw_value"])["sample_id"] == "v2", "the refused message"
    assert refused["detail"].startswith("the sample of the view at views/0/11 was not "
                                        "published: ") and "MSG_SIZE_TOO_LARGE" in refused["detail"]
    assert sink.drop_counts(collected) == {"late": 1, "error": 1}
