"""Idempotent, user-keyed producing that never loses a record silently.

The partitioner is the Java client's (murmur2), so every Kafka client puts a user on the
same partition as we do; `_random` only spreads null keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, Message, Producer

from spark_jobs.settings import KafkaSettings
from spark_jobs.streaming.kafka.client import client_config

PRODUCER_DEFAULTS: dict[str, Any] = {
    "enable.idempotence": True,
    "acks": "all",
    "compression.type": "lz4",
    "linger.ms": 5,
    "batch.num.messages": 10_000,
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 1 << 20,
    "partitioner": "murmur2_random",
    # Every delivery callback of ours looks at failures only. Without this the client builds
    # a Message and calls into Python for each delivered one: in training_samples' driver,
    # ~4.6 us of every sample published (py-spy; BENCHMARKS.md, seventeenth session). The
    # Python client still frees each message's callback (confluent-kafka-python issue #84,
    # fixed by #140). The client takes a Python bool here only ("true" fails at start).
    "delivery.report.only.error": True,
}
FLUSH_TIMEOUT_S = 120.0
_POLL_EVERY = 10_000
_SHOWN_FAILURES = 5


class KafkaDeliveryError(RuntimeError):
    """Some records were not delivered; `failures` holds (key, error) of the first ones."""

    def __init__(self, topic: str, failed: int, failures: list[tuple[Any, str]]) -> None:
        shown = "; ".join(f"key={key!r}: {error}" for key, error in failures)
        super().__init__(f"{failed} record(s) to {topic!r} not delivered (first: {shown})")
        self.topic = topic
        self.failed = failed
        self.failures = failures


def make_producer(kafka: KafkaSettings, **extra: Any) -> Producer:
    """Producer with the project defaults < the configured `kafka.client` < `extra`."""
    return Producer({**PRODUCER_DEFAULTS, **client_config(kafka), **extra})


class _Deliveries:
    """Counts failed deliveries and keeps the first few for the error message."""

    def __init__(self) -> None:
        self.failed = 0
        self.failures: list[tuple[Any, str]] = []

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self.failed += 1
            if len(self.failures) < _SHOWN_FAILURES:
                self.failures.append((message.key(), str(error)))


class Publisher:
    """Records of one topic produced one at a time, each leaving as soon as it is found (and
    stamped with the producer's clock then, unless given a timestamp); `flush()` waits for
    all and raises KafkaDeliveryError if any failed. `headers` go on every record."""

    def __init__(self, producer: Producer, topic: str,
                 headers: list[tuple[str, bytes]] | None = None) -> None:
        self.producer = producer
        self.topic = topic
        self.headers = headers
        self.sent = 0
        self._deliveries = _Deliveries()

    def send(self, key: str | bytes | None, value: bytes | str, timestamp: int = 0) -> None:
        while True:
            try:
                self.producer.produce(self.topic, value, key, timestamp=timestamp,
                                      on_delivery=self._deliveries, headers=self.headers)
                break
            except BufferError:
                self.producer.poll(0.05)
        self.sent += 1
        if self.sent % _POLL_EVERY == 0:
            self.producer.poll(0)

    def flush(self) -> int:
        """Wait for every record sent; the count, or KafkaDeliveryError."""
        deliveries = self._deliveries
        remaining = self.producer.flush(FLUSH_TIMEOUT_S)
        if remaining:
            deliveries.failed += remaining
            deliveries.failures.append(
                (None, f"{remaining} still queued after {FLUSH_TIMEOUT_S} s"))
        if deliveries.failed:
            raise KafkaDeliveryError(self.topic, deliveries.failed, deliveries.failures)
        return self.sent


def produce_all(
    producer: Producer,
    topic: str,
    keys: Sequence[str | bytes | None],
    values: Sequence[bytes | str],
    timestamps: Sequence[int] | None = None,
) -> int:
    """Produce every record, flush, and raise KafkaDeliveryError if any failed; returns the count.

    `timestamps` are message timestamps in epoch ms (default: the producer's clock).
    """
    if len(keys) != len(values):
        raise ValueError(f"{len(keys)} keys but {len(values)} values")
    if timestamps is not None and len(timestamps) != len(values):
        raise ValueError(f"{len(timestamps)} timestamps but {len(values)} values")
    publisher = Publisher(producer, topic)
    for index, (key, value) in enumerate(zip(keys, values, strict=True)):
        publisher.send(key, value, 0 if timestamps is None else int(timestamps[index]))
    return publisher.flush()


def _as_key(value: Any) -> str | bytes | None:
    if value is None or isinstance(value, str | bytes):
        return value
    return str(value)


def produce_arrow(
    producer: Producer,
    topic: str,
    table: pa.Table | pa.RecordBatch,
    key_column: str = "key",
    value_column: str = "value",
    timestamp_column: str | None = None,
) -> int:
    """Produce one record per row (e.g. from a driver-side foreachBatch sink); returns the count.

    Values are JSON strings or bytes; integer keys are sent as decimal text.
    """
    keys = [_as_key(k) for k in table.column(key_column).to_pylist()]
    values = table.column(value_column).to_pylist()
    if any(v is None for v in values):
        raise ValueError(f"column {value_column!r} has null values; every record needs a value")
    timestamps = None
    if timestamp_column is not None:
        timestamps = table.column(timestamp_column).to_pylist()
    return produce_all(producer, topic, keys, values, timestamps)
