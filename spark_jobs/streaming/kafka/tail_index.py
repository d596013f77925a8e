"""A tailing consumer that keeps a source's end offsets and recent event times current.

Planning a micro-batch asked Kafka for every partition's end (metadata, ListOffsets, a fetch
to prove the high watermark fresh on Tansu) and for the event times of records at the planned
cuts: round trips that made up a good part of a low-latency job's cycle (BENCHMARKS.md,
"a shorter micro-batch cycle"). This index does that work in a background thread of the
planner process instead: one consumer assigned to every partition, reading from the tail, so
a planner reads the ends and the recent records' event times from memory.

With `keep_records` it also keeps the records themselves from the moment it reached the tail,
so a reader in the same process (the prefetching source, see kafka/prefetch.py) hands a
micro-batch its records from memory instead of fetching them again.

Its answers are always safe to plan with: an end is an offset the broker reported (a
partition-EOF position) or one past a record the index received, so it never exceeds what
exists; a planner that gets no answer (index not caught up, stale, partition unknown, offset
older than the index remembers) uses its exact Kafka look-ups instead. A log that goes
backwards (a recreated topic, an in-memory broker restarted) stops the index for good, so
the exact look-ups report it as they always did.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from array import array
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence

from confluent_kafka import OFFSET_END, Consumer, KafkaError, Message, TopicPartition

from spark_jobs.settings import KafkaSettings
from spark_jobs.streaming.kafka.client import client_config

STALE_AFTER_S = 0.5  # an index whose thread has not polled for this long is not trusted
REFRESH_PARTITIONS_S = 5.0
REMEMBERED_RECORDS = 50_000  # per partition, for event-time answers near the tail
POLL_TIMEOUT_S = 0.02
TAIL_FETCH_WAIT_MS = 20
POLL_BATCH = 2_000
KEPT_RECORDS = 200_000  # per partition, when records are kept: ~40 MB of 200-byte messages

EventTime = Callable[[Message], int]
LOG = logging.getLogger("tideline.kafka")
# Errors that mean the partition as the index knew it is gone (deleted, recreated, truncated).
_LOST = frozenset({KafkaError.OFFSET_OUT_OF_RANGE, KafkaError.UNKNOWN_TOPIC_OR_PART,
                   KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC,
                   KafkaError._AUTO_OFFSET_RESET})


class LogRewoundError(RuntimeError):
    """A partition's log went backwards (topic recreated, broker restarted without its data):
    the index's ends are no longer true, so it stops answering."""


class _Partition:
    """What the index knows of one partition: its end and its newest records' event times."""

    __slots__ = ("end", "offsets", "times")

    def __init__(self) -> None:
        self.end: int | None = None  # None until the tail was reached or a record arrived
        self.offsets = array("q")
        self.times = array("q")

    def add(self, offset: int, event_time: int) -> None:
        if self.offsets and offset <= self.offsets[-1]:
            return  # a broker may resend a batch from its base offset
        self.offsets.append(offset)
        self.times.append(event_time)
        self.end = max(self.end or 0, offset + 1)
        if len(self.offsets) > 2 * REMEMBERED_RECORDS:
            del self.offsets[:-REMEMBERED_RECORDS]
            del self.times[:-REMEMBERED_RECORDS]

    def reached(self, end: int) -> None:
        if self.end is not None and end < self.end:
            raise LogRewoundError(f"partition ends at {end}, after reaching {self.end}")
        self.end = end

    def event_time_at(self, offset: int) -> int | None:
        """Event time of the first record at or after `offset`, if the index remembers it."""
        offsets = self.offsets
        if not offsets or offset < offsets[0] or offset > offsets[-1]:
            return None
        return self.times[bisect_left(offsets, offset)]


class _KeptRecords:
    """Every record of one partition from `first` on, as fetched (a gap in the offsets is a
    gap in the log: transaction markers, compaction)."""

    __slots__ = ("first", "messages", "offsets")

    def __init__(self) -> None:
        self.first: int | None = None  # complete from this offset on; None until tailing began
        self.offsets = array("q")
        self.messages: list[Message] = []

    def add(self, message: Message) -> None:
        offset = message.offset()
        if self.first is None:
            self.first = offset
        if self.offsets and offset <= self.offsets[-1]:
            return
        self.offsets.append(offset)
        self.messages.append(message)
        if len(self.offsets) > KEPT_RECORDS:
            self.release(self.offsets[len(self.offsets) // 2])

    def reached(self, end: int) -> None:
        if self.first is None:
            self.first = end

    def release(self, before: int) -> None:
        """Forget the records before `before` (read already, or too many kept)."""
        if self.first is None or before <= self.first:
            return
        cut = bisect_left(self.offsets, before)
        del self.offsets[:cut]
        del self.messages[:cut]
        self.first = before

    def between(self, start: int, end: int) -> list[Message] | None:
        """The records with start <= offset < end, or None unless all of them are kept."""
        if self.first is None or start < self.first:
            return None
        offsets = self.offsets
        return self.messages[bisect_left(offsets, start):bisect_left(offsets, end)]


class TailIndex:
    """Background tailing of `topics`; answers keyed by the source's partition keys."""

    def __init__(
        self, kafka: KafkaSettings, topics: Sequence[str], event_time: EventTime,
        key: Callable[[str, int], str], keep_records: bool = False,
    ) -> None:
        self._kafka = kafka
        self._keep_records = keep_records
        self._kept: dict[str, _KeptRecords] = {}
        self._topics = tuple(topics)
        self._event_time = event_time
        self._key = key
        self._lock = threading.Lock()
        self._partitions: dict[str, _Partition] = {}
        self._assigned: list[tuple[str, str, int]] = []  # (key, topic, partition)
        self._polled_at = 0.0
        self._failure: BaseException | None = None
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tideline-tail-index",
                                        daemon=True)
        self._thread.start()

    # -- answers (planner thread) ----------------------------------------------------------

    def _fresh(self) -> bool:
        return (self._failure is None and self._thread.is_alive()
                and time.monotonic() - self._polled_at < STALE_AFTER_S)

    def ends(self, keys: Sequence[str] | None = None) -> dict[str, int] | None:
        """Every known partition's end, or None when the index cannot vouch for all of them
        (not caught up yet, stale, or missing one of `keys`)."""
        with self._lock:
            if not self._fresh() or not self._partitions:
                return None
            found = {k: p.end for k, p in self._partitions.items()}
        if any(end is None for end in found.values()):
            return None
        if keys is not None and any(k not in found for k in keys):
            return None
        return {k: int(end) for k, end in found.items() if end is not None}

    def event_times(self, offsets: Mapping[str, int]) -> dict[str, int]:
        """Event times of the records at the offsets the index remembers (others omitted)."""
        found: dict[str, int] = {}
        with self._lock:
            for key, offset in offsets.items():
                partition = self._partitions.get(key)
                at = None if partition is None else partition.event_time_at(offset)
                if at is not None:
                    found[key] = at
        return found

    def records(self, key: str, start: int, end: int) -> list[Message] | None:
        """The records of offsets [start, end) of one partition, if the index kept them all
        (records kept, caught up to `end`, nothing before `start` forgotten)."""
        with self._lock:
            partition = self._partitions.get(key)
            kept = self._kept.get(key)
            if (not self._fresh() or partition is None or kept is None
                    or partition.end is None or end > partition.end):
                return None
            return kept.between(start, end)

    def release(self, offsets: Mapping[str, int]) -> None:
        """The reader will not ask for records before these offsets again: free them."""
        with self._lock:
            for key, offset in offsets.items():
                kept = self._kept.get(key)
                if kept is not None:
                    kept.release(offset)

    def close(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=5)

    # -- tailing (background thread) ---------------------------------------------------------

    def _consumer(self) -> Consumer:
        return Consumer(client_config(self._kafka, **{
            "group.id": f"tideline-tail-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            # a position that became invalid is an error, never a silent jump past a gap
            # (the index hands out kept records as complete ranges)
            "auto.offset.reset": "error",
            # how long the broker may hold a fetch that finds nothing new (most of them): the
            # embedded broker's cost per fetch grows with the record batches a partition holds
            # (bench.tansu_tail_cost, one tailing consumer at 5 ms: 14 / 29 / 61 % of a core
            # at 2k / 5.5k / 10.5k batches; at 20 ms 15 / 32 / 47 %). In 150 s runs at 9k/s
            # its share fell from 32-37 % of a core to 24-26 %; a record on a quiet partition
            # may wait up to the 20 ms hold (p95 10 ms), and 1k/s alert latency did not get
            # worse (BENCHMARKS.md, tenth session)
            "fetch.wait.max.ms": TAIL_FETCH_WAIT_MS,
            "fetch.queue.backoff.ms": 1,
            "fetch.error.backoff.ms": 10,
            "queued.max.messages.kbytes": 8_192,
        }))

    def _refresh_partitions(self, consumer: Consumer) -> None:
        """Assign partitions that appeared (all of them at the first call), from their tail."""
        metadata = consumer.list_topics(timeout=10)
        new: list[TopicPartition] = []
        for topic in self._topics:
            found = metadata.topics.get(topic)
            if found is None or found.error is not None:
                continue
            for p in found.partitions:
                key = self._key(topic, p)
                if key not in self._partitions:
                    new.append(TopicPartition(topic, p, OFFSET_END))
                    self._assigned.append((key, topic, p))
                    with self._lock:
                        self._partitions[key] = _Partition()
                        if self._keep_records:
                            self._kept[key] = _KeptRecords()
        if new:
            consumer.incremental_assign(new)

    def _run(self) -> None:
        consumer: Consumer | None = None
        try:
            consumer = self._consumer()
            refreshed = 0.0
            while not self._stopping.is_set():
                if time.monotonic() - refreshed > REFRESH_PARTITIONS_S:
                    self._refresh_partitions(consumer)
                    refreshed = time.monotonic()
                messages = consumer.consume(num_messages=POLL_BATCH, timeout=POLL_TIMEOUT_S)
                self._record(messages)
                self._check_not_rewound(consumer)
        except BaseException as exc:
            self._failure = exc  # planners fall back to their exact look-ups
            LOG.warning("tail index of %s stopped, planning asks Kafka from now on: %s",
                        ",".join(self._topics), exc)
        finally:
            if consumer is not None:
                consumer.close()

    def _check_not_rewound(self, consumer: Consumer) -> None:
        """The high watermark of the last fetch response below a known end: the log was
        replaced (a broker fetching past its end may answer with no error and no data)."""
        for key, topic, p in self._assigned:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), cached=True)
            end = self._partitions[key].end
            if high >= 0 and end is not None and high < end:
                raise LogRewoundError(f"{topic}/{p}: the broker reports its end at {high}, "
                                      f"after {end} was reached")

    def _record(self, messages: list[Message]) -> None:
        seen: list[tuple[str, int, int | None, Message]] = []
        for message in messages:
            error = message.error()
            key = self._key(message.topic(), message.partition())
            if error is None:
                seen.append((key, message.offset(), self._event_time(message), message))
            elif error.code() == KafkaError._PARTITION_EOF:
                seen.append((key, message.offset(), None, message))
            elif error.code() in _LOST:
                raise LogRewoundError(f"{message.topic()}/{message.partition()}: {error}")
        with self._lock:
            for key, offset, event_time, message in seen:
                partition = self._partitions.get(key)
                if partition is None:
                    continue
                kept = self._kept.get(key)
                if event_time is None:
                    partition.reached(offset)
                    if kept is not None:
                        kept.reached(offset)
                else:
                    partition.add(offset, event_time)
                    if kept is not None:
                        kept.add(message)
            self._polled_at = time.monotonic()
