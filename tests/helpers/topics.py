"""Read a whole topic as JSON values, and produce messages with chosen Kafka timestamps."""

from __future__ import annotations

import json
from typing import Any

from spark_jobs.config import KafkaSettings
from spark_jobs.kafka.producer import make_producer, produce_all
from spark_jobs.kafka.topic_reader import read_all


def read_values(kafka: KafkaSettings, topic: str) -> list[Any]:
    """Every message value of `topic` as parsed JSON, in arrival order."""
    return [json.loads(message.value) for message in read_all(kafka, topic)]


def send(kafka: KafkaSettings, topic: str, messages: list[tuple[int, Any]],
         key: str | None = None) -> None:
    """Produce (Kafka timestamp ms, JSON value or raw text) pairs in order, one partition."""
    producer = make_producer(kafka)
    values = [m if isinstance(m, str | bytes) else json.dumps(m) for _, m in messages]
    produce_all(producer, topic, [key or "k"] * len(values), values, [t for t, _ in messages])
    producer.flush(30)
