"""Read a whole topic as JSON values, produce messages with chosen Kafka timestamps, look up a
topic's exact ends, and wait for a condition."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from spark_jobs.settings import KafkaSettings
from spark_jobs.streaming.kafka.producer import make_producer, produce_all
from spark_jobs.streaming.kafka.topic_admin import end_offsets
from spark_jobs.streaming.kafka.topic_reader import read_all


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


def exact_ends(kafka: KafkaSettings, topic: str) -> dict[str, int]:
    """Every partition's end offset as Kafka reports it, keyed like a source's offsets."""
    return {str(p): n for p, n in end_offsets(kafka, topic).items()}


def wait_for(check: Callable[[], Any], timeout_s: float = 15.0) -> Any:
    """Poll `check` until it returns something true (returned), or fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(0.02)
    raise AssertionError("condition not met in time")
