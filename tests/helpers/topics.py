"""Read a whole topic (every partition, start to current end) and produce with set times."""

from __future__ import annotations

import json
from typing import Any

from confluent_kafka import TopicPartition

from spark_jobs.config import KafkaSettings
from spark_jobs.kafka.admin import end_offsets, offsets_consumer
from spark_jobs.kafka.producer import make_producer, produce_all


def read_values(kafka: KafkaSettings, topic: str, timeout_s: float = 30.0) -> list[Any]:
    """Every message value of `topic` as parsed JSON, in (partition, offset) order."""
    wanted = end_offsets(kafka, topic)
    consumer = offsets_consumer(kafka)
    found: list[tuple[int, int, Any]] = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p, end in wanted.items() if end > 0])
        remaining = sum(wanted.values())
        while remaining > 0:
            message = consumer.poll(timeout_s)
            assert message is not None, f"{topic}: {remaining} messages not read"
            if message.error():
                continue
            found.append((message.partition(), message.offset(), json.loads(message.value())))
            remaining -= 1
    finally:
        consumer.close()
    return [value for _, _, value in sorted(found, key=lambda x: x[:2])]


def send(kafka: KafkaSettings, topic: str, messages: list[tuple[int, Any]],
         key: str | None = None) -> None:
    """Produce (kafka timestamp ms, JSON value or raw text) pairs in order, one partition."""
    producer = make_producer(kafka)
    values = [m if isinstance(m, str | bytes) else json.dumps(m) for _, m in messages]
    produce_all(producer, topic, [key or "k"] * len(values), values, [t for t, _ in messages])
    producer.flush(30)
