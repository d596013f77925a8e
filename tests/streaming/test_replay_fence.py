"""The replay fence: a batch replayed by a restarted process publishes only what its first,
killed attempt did not get out; records of other batches and of later batches are untouched."""

from __future__ import annotations

import uuid
from collections import Counter

import pytest

from spark_jobs.streaming.kafka import replay_fence
from spark_jobs.streaming.kafka.producer import make_producer
from spark_jobs.streaming.kafka.replay_fence import HEADER, ReplayFence, key_only
from spark_jobs.streaming.kafka.topic_admin import ensure_topics
from spark_jobs.streaming.kafka.topic_reader import read_all

pytestmark = [pytest.mark.integration, pytest.mark.kafka]


def _topic(kafka) -> str:
    name = f"fence-{uuid.uuid4().hex[:10]}"
    ensure_topics(kafka, [name], 2)
    return name


def _records(n: int, start: int = 0) -> tuple[list[str], list[bytes]]:
    keys = [str(i % 5) for i in range(start, start + n)]
    return keys, [f'{{"n": {i}}}'.encode() for i in range(start, start + n)]


def test_a_replayed_batch_sends_only_what_is_missing(kafka, monkeypatch):
    monkeypatch.setattr(replay_fence, "FIRST_STEP", 3)  # several steps back through the tail
    topic = _topic(kafka)
    producer = make_producer(kafka)
    keys, values = _records(40)
    first = ReplayFence(kafka, lambda: "lineage")
    first.begin(6)
    first.produce(producer, topic, keys[:10], values[:10])  # batch 6, complete
    first.begin(7)
    # batch 7 dies after 13 of its 30 records got out (a prefix of each partition)
    first.produce(producer, topic, keys[10:23], values[10:23])

    restarted = ReplayFence(kafka, lambda: "lineage")
    restarted.begin(7)
    assert restarted.produce(producer, topic, keys[10:40], values[10:40]) == 17
    restarted.begin(8)
    again = _records(3)  # equal to records of batch 6 and 7: a new batch is never checked
    assert restarted.produce(producer, topic, *again) == 3

    published = read_all(kafka, topic)
    assert Counter(m.value for m in published) == Counter(values) + Counter(again[1])
    tags = Counter(dict(headers)[HEADER] for headers in _headers(kafka, topic))
    assert tags == {b"lineage/6": 10, b"lineage/7": 30, b"lineage/8": 3}


def test_other_lineages_and_identity_by_key(kafka):
    topic = _topic(kafka)
    producer = make_producer(kafka)
    old = ReplayFence(kafka, lambda: "old")
    old.begin(0)
    old.produce(producer, topic, ["1:9"], [b'{"alertTime": 1}'])  # a reset checkpoint's batch 0
    crashed = ReplayFence(kafka, lambda: "new")
    crashed.begin(0)
    crashed.produce(producer, topic, ["1:1", "1:2"], [b'{"alertTime": 5}', b'{"alertTime": 5}'],
                    key_only)

    restarted = ReplayFence(kafka, lambda: "new")
    restarted.begin(0)
    # the same alerts found again later: other stamps, same keys; 1:9 is new to this lineage
    sent = restarted.produce(producer, topic, ["1:1", "1:2", "1:9"],
                             [b'{"alertTime": 8}'] * 3, key_only)
    assert sent == 1
    assert sorted(m.key for m in read_all(kafka, topic)) == [b"1:1", b"1:2", b"1:9", b"1:9"]


def _headers(kafka, topic: str) -> list:
    """Every record's headers (read_all keeps none)."""
    from spark_jobs.streaming.kafka.topic_admin import end_offsets, offsets_consumer

    consumer = offsets_consumer(kafka)
    try:
        return [headers for partition, end in end_offsets(kafka, topic).items() if end
                for headers, _, _ in replay_fence._read(consumer, topic, partition, 0, end)]
    finally:
        consumer.close()
