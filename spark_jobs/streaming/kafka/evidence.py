"""The raw bytes of dead-lettered records, read back from Kafka by their coordinates.

Dead letters keep the evidence (CONTRACTS section 9): the bytes as received, not a decoded
form. Carrying every record's bytes through the stateful steps would cost every record for
the few that die, so the sink reads the few back by (topic, partition, offset) instead; they
are still in the topic, since the batch that read them is being written.
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from collections.abc import Iterable

from confluent_kafka import Consumer, KafkaError, TopicPartition

from spark_jobs.streaming.kafka.client import client_config
from spark_jobs.streaming.settings import KafkaSettings

Coordinate = tuple[str, int, int]  # topic, partition, offset
READ_TIMEOUT_S = 10.0
CHUNK = 1000  # messages per consume() call


def fetch_values(kafka: KafkaSettings, wanted: Iterable[Coordinate],
                 timeout_s: float = READ_TIMEOUT_S) -> dict[Coordinate, bytes | None]:
    """The value of each record found (None for a null value); a record no longer readable
    (retention, a recreated topic) or not read within `timeout_s` is absent from the result."""
    by_partition: dict[tuple[str, int], set[int]] = defaultdict(set)
    for topic, partition, offset in wanted:
        by_partition[(topic, partition)].add(offset)
    if not by_partition:
        return {}
    consumer = Consumer(client_config(kafka, **{
        "group.id": f"tideline-evidence-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
        "fetch.wait.max.ms": 10,
    }))
    try:
        found: dict[Coordinate, bytes | None] = {}
        for (topic, partition), offsets in by_partition.items():
            found.update(_read_partition(consumer, topic, partition, offsets, timeout_s))
        return found
    finally:
        consumer.close()


def _read_partition(consumer: Consumer, topic: str, partition: int, offsets: set[int],
                    timeout_s: float) -> dict[Coordinate, bytes | None]:
    """Read [min, max] of `offsets` once, keeping the wanted ones (they are usually close)."""
    first, last = min(offsets), max(offsets)
    consumer.assign([TopicPartition(topic, partition, first)])
    found: dict[Coordinate, bytes | None] = {}
    deadline = time.monotonic() + timeout_s
    position = first
    while position <= last and time.monotonic() < deadline:
        # no more than the range holds: consume() waits its whole timeout for a count not met
        wanted = min(CHUNK, last - position + 1)
        for message in consumer.consume(num_messages=wanted, timeout=0.5):
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF or not error.retriable():
                    return found
                continue
            position = message.offset() + 1
            if message.offset() in offsets:
                found[(topic, partition, message.offset())] = message.value()
            if position > last:
                break
    return found
