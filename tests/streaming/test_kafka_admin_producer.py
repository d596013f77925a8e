"""Topic admin, true end offsets on batched topics, and keyed, idempotent producing."""

from __future__ import annotations

import gc
import time
import uuid
import weakref
from collections import defaultdict

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, Message, TopicPartition

from spark_jobs.settings import KafkaSettings
from spark_jobs.streaming.kafka.producer import (
    KafkaDeliveryError,
    make_producer,
    produce_all,
    produce_arrow,
)
from spark_jobs.streaming.kafka.topic_admin import (
    TopicNotFoundError,
    beginning_offsets,
    end_offsets,
    ensure_topics,
    partitions_of,
)

pytestmark = [pytest.mark.integration, pytest.mark.kafka]


def _topic(kafka: KafkaSettings, partitions: int) -> str:
    name = f"admin-{uuid.uuid4().hex[:10]}"
    ensure_topics(kafka, [name], partitions)
    return name


def _consume_all(kafka: KafkaSettings, topic: str, count: int) -> list[Message]:
    consumer = Consumer(
        {
            "bootstrap.servers": kafka.bootstrap,
            "group.id": uuid.uuid4().hex,
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions_of(kafka, topic)])
        out: list[Message] = []
        deadline = time.monotonic() + 15
        while len(out) < count and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=count - len(out), timeout=0.5):
                assert message.error() is None, message.error()
                out.append(message)
        assert len(out) == count
        return out
    finally:
        consumer.close()


def murmur2(data: bytes) -> int:
    """Kafka's Java `Utils.murmur2` (the default partitioner's hash)."""
    m, length = 0x5BD1E995, len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail, rest = length & ~3, length % 4
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    return h ^ (h >> 15)


def test_ensure_topics_is_idempotent(kafka: KafkaSettings) -> None:
    names = [f"ens-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    ensure_topics(kafka, names, 3)
    ensure_topics(kafka, names, 3)
    ensure_topics(kafka, names, 5)  # existing topics are left as they are
    for name in names:
        assert partitions_of(kafka, name) == [0, 1, 2]
        assert beginning_offsets(kafka, name) == {0: 0, 1: 0, 2: 0}
        assert end_offsets(kafka, name) == {0: 0, 1: 0, 2: 0}


def test_missing_topic_is_a_clear_error(kafka: KafkaSettings) -> None:
    with pytest.raises(TopicNotFoundError, match="does not exist"):
        partitions_of(kafka, f"absent-{uuid.uuid4().hex}")


def test_end_offsets_after_batched_produce(kafka: KafkaSettings) -> None:
    """Many records per batch: exactly where Tansu's ListOffsets(latest) is wrong."""
    topic = _topic(kafka, 2)
    producer = make_producer(kafka, **{"linger.ms": 50})
    keys = [str(i % 13) for i in range(500)]
    assert produce_all(producer, topic, keys, [b"x" * 20] * 500) == 500
    per_partition: dict[int, int] = defaultdict(int)
    for message in _consume_all(kafka, topic, 500):
        per_partition[message.partition()] += 1
    assert end_offsets(kafka, topic) == {0: per_partition[0], 1: per_partition[1]}
    assert beginning_offsets(kafka, topic) == {0: 0, 1: 0}
    # A later single-record batch moves the end by exactly one.
    produce_all(producer, topic, ["0"], [b"y"])
    ends = end_offsets(kafka, topic)
    assert sum(ends.values()) == 501


def test_produce_all_keys_partition_like_java_clients(kafka: KafkaSettings) -> None:
    topic = _topic(kafka, 3)
    producer = make_producer(kafka)
    keys = [str(user) for user in range(40) for _ in range(3)]
    stamps = [1_767_225_600_000 + i for i in range(len(keys))]
    values = [f'{{"n": {i}}}' for i in range(len(keys))]
    assert produce_all(producer, topic, keys, values, stamps) == len(keys)
    partition_of: dict[str, set[int]] = defaultdict(set)
    for message in _consume_all(kafka, topic, len(keys)):
        key = message.key().decode()
        partition_of[key].add(message.partition())
        index = int(message.value().decode()[6:-1])
        assert message.timestamp()[1] == stamps[index]
        assert keys[index] == key
    for key, partitions in partition_of.items():
        assert partitions == {(murmur2(key.encode()) & 0x7FFFFFFF) % 3}, key


def test_produce_arrow(kafka: KafkaSettings) -> None:
    topic = _topic(kafka, 2)
    table = pa.table(
        {
            "key": pa.array([7, 8, None], pa.int64()),
            "value": ['{"a": 1}', '{"a": 2}', '{"a": 3}'],
        }
    )
    assert produce_arrow(make_producer(kafka), topic, table) == 3
    got = {(m.key(), m.value()) for m in _consume_all(kafka, topic, 3)}
    assert got == {(b"7", b'{"a": 1}'), (b"8", b'{"a": 2}'), (None, b'{"a": 3}')}

    binary = pa.table({"k": ["u1"], "v": pa.array([b"\x00raw"], pa.binary())})
    assert produce_arrow(make_producer(kafka), topic, binary, "k", "v") == 1
    assert end_offsets(kafka, topic)[0] + end_offsets(kafka, topic)[1] == 4


def test_failed_delivery_raises(make_settings) -> None:
    unreachable = make_settings("127.0.0.1:1").kafka
    producer = make_producer(unreachable, **{"message.timeout.ms": 300, "log_level": 0})
    with pytest.raises(KafkaDeliveryError, match="2 record") as failure:
        produce_all(producer, "nowhere", ["a", "b"], [b"1", b"2"])
    assert failure.value.failed == 2
    assert failure.value.failures[0][0] == b"a"


def test_mismatched_lengths_rejected(kafka: KafkaSettings) -> None:
    with pytest.raises(ValueError, match="keys"):
        produce_all(make_producer(kafka), "t", ["a"], [b"1", b"2"])


class _Callback:
    """A delivery callback that records its calls (weakly referable, to see it released)."""

    def __init__(self, calls: list) -> None:
        self.calls = calls

    def __call__(self, error, message) -> None:
        self.calls.append(error)


def test_delivered_messages_call_no_python_and_release_their_callbacks(kafka) -> None:
    """Only failures reach Python (every callback of ours ignores the rest): a delivered
    message costs no Message object and no call. Each message's own callback is still
    released once the message is delivered, so a long-running sink does not leak them."""
    topic = _topic(kafka, 1)
    producer = make_producer(kafka)
    calls: list = []
    callbacks = [_Callback(calls) for _ in range(50)]
    released = [weakref.ref(callback) for callback in callbacks]
    for index, callback in enumerate(callbacks):
        producer.produce(topic, b"v", str(index), on_delivery=callback)
    del callback, callbacks
    assert producer.flush(15) == 0
    gc.collect()
    assert calls == []
    assert [ref() for ref in released] == [None] * 50
    assert sum(end_offsets(kafka, topic).values()) == 50


def test_a_message_not_delivered_still_calls_its_callback_with_the_error(make_settings):
    unreachable = make_settings("127.0.0.1:1").kafka
    producer = make_producer(unreachable, **{"message.timeout.ms": 300, "log_level": 0})
    calls: list = []
    for index in range(3):
        producer.produce("nowhere", b"v", str(index), on_delivery=_Callback(calls))
    producer.flush(15)
    assert len(calls) == 3 and all(error is not None for error in calls), calls
