"""Consumers kept by a Python worker between the offset ranges it reads.

Spark reuses its Python workers from task to task, and a streaming query reads each partition
again every micro-batch. A new consumer per range paid the connection, metadata and broker
handshake on every batch (a noticeable share of a low-latency job's cycle); a kept consumer is
assigned to the new range's start and only fetches. Kept consumers are unassigned: idle,
they would poll the broker every `fetch.wait.max.ms`.
"""

from __future__ import annotations

import atexit
import uuid
from collections import OrderedDict

from confluent_kafka import Consumer, TopicPartition

from spark_jobs.settings import KafkaSettings
from spark_jobs.streaming.kafka.client import client_config

MAX_IDLE = 4  # per worker process and cluster; each may buffer up to its queue bound
QUEUED_MESSAGES = 20_000
QUEUED_KBYTES = 16_384


def _new_consumer(kafka: KafkaSettings) -> Consumer:
    return Consumer(client_config(kafka, **{
        "group.id": f"tideline-source-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        # Deleted offsets must fail the task, never be skipped silently.
        "auto.offset.reset": "error",
        "enable.partition.eof": True,
        # librdkafka otherwise pauses fetching 1 s once its queue is full.
        "fetch.queue.backoff.ms": 5,
        "fetch.wait.max.ms": 10,
        # Bound prefetch: a consumer must not fetch and decompress far past its range.
        "queued.min.messages": QUEUED_MESSAGES,
        "queued.max.messages.kbytes": QUEUED_KBYTES,
        "fetch.max.bytes": 8 << 20,
        "max.partition.fetch.bytes": 4 << 20,
    }))


def _cluster(kafka: KafkaSettings) -> str:
    return repr((kafka.bootstrap, sorted((str(k), repr(v)) for k, v in kafka.client.items())))


class RangeConsumers:
    """Idle consumers by (cluster, topic, partition), the least recently used closed first."""

    def __init__(self, max_idle: int = MAX_IDLE) -> None:
        self.max_idle = max_idle
        self._idle: OrderedDict[tuple[str, str, int], Consumer] = OrderedDict()

    def take(self, kafka: KafkaSettings, topic: str, partition: int, start: int) -> Consumer:
        """A consumer (kept, or new) assigned to topic/partition from `start`."""
        key = (_cluster(kafka), topic, partition)
        consumer = self._idle.pop(key, None)
        where = TopicPartition(topic, partition, start)
        if consumer is None:
            consumer = _new_consumer(kafka)
        try:
            consumer.assign([where])
        except BaseException:
            consumer.close()
            raise
        return consumer

    def give_back(self, kafka: KafkaSettings, topic: str, partition: int,
                  consumer: Consumer) -> None:
        """Keep a consumer that read its range completely (and nothing past it)."""
        key = (_cluster(kafka), topic, partition)
        consumer.unassign()  # an idle consumer fetches nothing
        old = self._idle.pop(key, None)
        if old is not None:
            old.close()
        self._idle[key] = consumer
        while len(self._idle) > self.max_idle:
            _, oldest = self._idle.popitem(last=False)
            oldest.close()

    def close(self) -> None:
        while self._idle:
            _, consumer = self._idle.popitem()
            consumer.close()


WORKER_CONSUMERS = RangeConsumers()  # one per Python worker process
atexit.register(WORKER_CONSUMERS.close)
