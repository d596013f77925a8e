"""Exactly-once topics across a crash: a replayed batch publishes only what its first
attempt did not get out.

A sink publishes a batch's records before it commits the batch (the Delta marker, then
Spark's commit log), so a process killed in between replays the batch after its restart
and, unfenced, publishes it a second time. Each record therefore carries the header
`tideline-batch` = "<lineage>/<batch id>". Only the first batch a process delivers can
have been partly published before (a failed batch ends the process), so for that batch
alone the fence reads the tail of each topic it publishes to, back to the first record of
another batch (the job is the topic's only writer), and skips the records already there:
same key and value, or the same identity for a topic whose values carry a wall-clock stamp.
Later batches pay for a header, nothing else.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Sequence

from confluent_kafka import KafkaError, Producer, TopicPartition

from spark_jobs.settings import KafkaSettings
from spark_jobs.streaming.kafka.producer import Publisher
from spark_jobs.streaming.kafka.topic_admin import end_offsets, offsets_consumer

HEADER = "tideline-batch"
FIRST_STEP = 256  # records read back per partition at first; grows 4x while still ours
READ_TIMEOUT_S = 30.0

Key = str | bytes | None
Identity = Callable[[Key, bytes | str], Hashable]


def key_and_value(key: Key, value: bytes | str) -> Hashable:
    """The default identity of a record: its key and value bytes."""
    as_bytes = key.encode() if isinstance(key, str) else key
    return as_bytes, value.encode() if isinstance(value, str) else value


def key_only(key: Key, value: bytes | str) -> Hashable:
    """For a topic whose key names the record (a rule's alert for one transaction)."""
    return key.encode() if isinstance(key, str) else key


class FencedPublisher(Publisher):
    """A Publisher that stamps the batch header and skips records already published."""

    def __init__(self, producer: Producer, topic: str, tag: bytes,
                 published: Counter, identity: Identity) -> None:
        super().__init__(producer, topic, headers=[(HEADER, tag)])
        self.published = published
        self.identity = identity
        self.skipped = 0

    def send(self, key: Key, value: bytes | str, timestamp: int = 0) -> None:
        if self.published:
            found = self.identity(key, value)
            if self.published[found] > 0:
                self.published[found] -= 1
                self.skipped += 1
                return
        super().send(key, value, timestamp)


class ReplayFence:
    """One job's fence: `begin(batch)` before a batch publishes, then its publishers."""

    def __init__(self, kafka: KafkaSettings, lineage: Callable[[], str]) -> None:
        self.kafka = kafka
        self._lineage = lineage
        self._tag = b""
        self._first = True
        self._checking = False

    def begin(self, batch_id: int) -> None:
        """Before a batch publishes (again for the same batch: no effect)."""
        tag = f"{self._lineage()}/{batch_id}".encode()
        if tag != self._tag:
            self._tag = tag
            self._checking, self._first = self._first, False

    def recheck(self) -> None:
        """The next batch looks up what an earlier attempt published, as a process's first
        batch does (a batch that failed in this process is delivered again)."""
        self._tag, self._first = b"", True

    @property
    def headers(self) -> list[tuple[str, bytes]]:
        """The batch header every record of the current batch carries."""
        return [(HEADER, self._tag)]

    def already_published(self, topic: str, identity: Identity = key_and_value) -> Counter:
        """What an earlier attempt of the current batch already got out to `topic` (only
        looked up on a process's first batch)."""
        return self.published(topic, identity) if self._checking else Counter()

    def publisher(self, producer: Producer, topic: str,
                  identity: Identity = key_and_value) -> FencedPublisher:
        """The batch's publisher for `topic`; on a process's first batch it skips what an
        earlier attempt of that batch already published."""
        published = self.published(topic, identity) if self._checking else Counter()
        return FencedPublisher(producer, topic, self._tag, published, identity)

    def produce(self, producer: Producer, topic: str, keys: Sequence[Key],
                values: Sequence[bytes | str], identity: Identity = key_and_value) -> int:
        """produce_all through the fence; returns the count sent (skipped ones excluded)."""
        if len(keys) != len(values):
            raise ValueError(f"{len(keys)} keys but {len(values)} values")
        if not values:
            return 0
        publisher = self.publisher(producer, topic, identity)
        for key, value in zip(keys, values, strict=True):
            publisher.send(key, value)
        return publisher.flush()

    def published(self, topic: str, identity: Identity = key_and_value) -> Counter:
        """The identities of the records of this batch already on `topic`."""
        found: Counter = Counter()
        ends = end_offsets(self.kafka, topic)
        consumer = offsets_consumer(self.kafka)
        try:
            for partition, end in ends.items():
                for key, value in _tail_of_batch(consumer, topic, partition, end, self._tag):
                    found[identity(key, value)] += 1
        finally:
            consumer.close()
        return found


def _tail_of_batch(consumer, topic: str, partition: int, end: int, tag: bytes
                   ) -> list[tuple[bytes | None, bytes]]:
    """The records at the end of one partition that carry `tag`, read backwards in growing
    steps until a record without it (or the log's start)."""
    low, _ = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                            timeout=READ_TIMEOUT_S)
    mine: list[tuple[bytes | None, bytes]] = []
    stop, step = end, FIRST_STEP
    while stop > low:
        start = max(low, stop - step)
        chunk = _read(consumer, topic, partition, start, stop)
        for headers, key, value in reversed(chunk):
            if (HEADER, tag) not in (headers or []):
                return mine
            mine.append((key, value))
        stop, step = start, step * 4
    return mine


def _read(consumer, topic: str, partition: int, start: int, stop: int) -> list:
    """(headers, key, value) of offsets [start, stop) of one partition, in offset order."""
    consumer.assign([TopicPartition(topic, partition, start)])
    found: list = []
    position = start
    while position < stop:
        messages = consumer.consume(num_messages=min(5_000, stop - position),
                                    timeout=READ_TIMEOUT_S)
        if not messages:
            raise TimeoutError(f"{topic}/{partition}: offsets [{position}, {stop}) unread "
                               f"after {READ_TIMEOUT_S} s")
        for message in messages:
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    position = stop
                continue
            if message.offset() >= stop:
                position = stop
                break
            found.append((message.headers(), message.key(), message.value()))
            position = message.offset() + 1
    return found
