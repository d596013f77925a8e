"""Read a whole topic once: every partition from its start to its current end.

For small control topics (the fraud rules) and tests; streaming jobs use the Spark source.
"""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import TopicPartition

from spark_jobs.settings import KafkaSettings
from spark_jobs.streaming.kafka.topic_admin import end_offsets, offsets_consumer

READ_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Message:
    timestamp: int
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


def read_all(kafka: KafkaSettings, topic: str, timeout_s: float = READ_TIMEOUT_S
             ) -> list[Message]:
    """Every message of `topic` now, in arrival order (Kafka timestamp, partition, offset)."""
    ends = end_offsets(kafka, topic)
    consumer = offsets_consumer(kafka)
    found: list[Message] = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p, end in ends.items() if end > 0])
        remaining = {p: end for p, end in ends.items() if end > 0}
        while remaining:
            message = consumer.poll(timeout_s)
            if message is None:
                raise TimeoutError(f"{topic}: no message for {timeout_s} s, "
                                   f"{sum(remaining.values())} offsets left to read")
            if message.error():
                continue
            partition, offset = message.partition(), message.offset()
            if partition not in remaining or offset >= ends[partition]:
                continue
            found.append(Message(message.timestamp()[1], partition, offset, message.key(),
                                 message.value()))
            if offset + 1 >= ends[partition]:
                del remaining[partition]
    finally:
        consumer.close()
    return sorted(found, key=lambda m: (m.timestamp, m.partition, m.offset))
