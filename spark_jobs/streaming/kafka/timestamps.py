"""Event time of single records at given offsets: the probe behind event-time admission control.

The event time is the JSON field named by the caller (decoded leniently: a record without a
usable field falls back to its Kafka timestamp, so a malformed message never blocks planning).

A fetch brings a whole record batch (thousands of records) for the one record asked for. The
probe keeps what each fetch brought, as a run of consecutive records from the offset asked
for, and answers later questions inside a run from it: the binary search of admission
control (event_time_split.py) then fetches until its interval fits in a run, not once per
halving (16 fetches of 25-75 ms per plan in a backlog of 100k records, BENCHMARKS.md).
"""

from __future__ import annotations

import time
from array import array
from bisect import bisect_left
from collections.abc import Callable, Mapping
from types import TracebackType

import orjson
from confluent_kafka import Consumer, Message, TopicPartition

from spark_jobs.settings import KafkaSettings
from spark_jobs.streaming.kafka.topic_admin import planning_consumer

PROBE_TIMEOUT_S = 10.0
# Records kept per fetch and partition: more saves fetches (~25 ms each on the embedded
# broker) but costs ~6 µs per record taken off the consumer; 1,000-3,000 measured best.
RUN_RECORDS = 2_000
_DRAIN = 1_000  # records taken off the consumer at a time


def event_time_of(message: Message, fields: Mapping[str, str | None]) -> int:
    """The record's event-time field (`fields` per topic; None: Kafka time), leniently."""
    field = fields.get(message.topic())
    if field is not None:
        try:
            value = orjson.loads(message.value() or b"null")
            ts = value.get(field) if isinstance(value, dict) else None
            if isinstance(ts, int) and not isinstance(ts, bool):
                return ts
        except orjson.JSONDecodeError:
            pass
    return message.timestamp()[1]


class _Run:
    """Consecutive records of one partition as one fetch delivered them, from `start` (the
    offset asked for) on: the first at or after any offset up to the last is known."""

    __slots__ = ("messages", "offsets", "start")

    def __init__(self, start: int) -> None:
        self.start = start
        self.offsets = array("q")
        self.messages: list[Message] = []

    def add(self, message: Message) -> bool:
        """Keep the partition's next record (False: the run is full)."""
        if len(self.offsets) >= RUN_RECORDS:
            return False
        offset = message.offset()
        if offset >= self.start and (not self.offsets or offset > self.offsets[-1]):
            self.offsets.append(offset)
            self.messages.append(message)
        return True

    def first_at(self, offset: int) -> Message | None:
        """The first record at or after `offset`, when the run covers it."""
        if not self.offsets or offset < self.start or offset > self.offsets[-1]:
            return None
        return self.messages[bisect_left(self.offsets, offset)]


class RecordProbe:
    """A consumer that fetches single records by offset: the caller's long-lived one, or a
    short-lived one of its own (closed on exit).

    Offsets are keyed by the source's partition keys; `split_key` maps a key to (topic,
    partition) and `fields` names the event-time field of each topic (None: Kafka time).
    """

    def __init__(
        self, kafka: KafkaSettings, split_key: Callable[[str], tuple[str, int]],
        fields: Mapping[str, str | None], consumer: Consumer | None = None,
    ) -> None:
        self.split_key = split_key
        self.fields = dict(fields)
        self._owned = consumer is None
        self.consumer = consumer if consumer is not None else planning_consumer(kafka)
        self._runs: dict[str, list[_Run]] = {}

    def __enter__(self) -> RecordProbe:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._owned:
            self.consumer.close()

    def _event_time(self, message: Message) -> int:
        return event_time_of(message, self.fields)

    def event_times(self, offsets: Mapping[str, int]) -> dict[str, int]:
        """Event time of the record at each partition's given offset (the first record at or
        after it, where the log has a gap)."""
        found: dict[str, int] = {}
        for key, at in offsets.items():
            message = self._remembered(key, at)
            if message is not None:
                found[key] = self._event_time(message)
        missing = {key: at for key, at in offsets.items() if key not in found}
        if missing:
            for key, message in self._fetch(missing).items():
                found[key] = self._event_time(message)
        return found

    def _remembered(self, key: str, offset: int) -> Message | None:
        for run in self._runs.get(key, ()):
            message = run.first_at(offset)
            if message is not None:
                return message
        return None

    def _fetch(self, offsets: Mapping[str, int]) -> dict[str, Message]:
        """The first record at or after each offset, from Kafka; what else the fetches
        delivered is kept as runs."""
        where = {self.split_key(key): key for key in offsets}
        self.consumer.assign(
            [TopicPartition(topic, p, offsets[key]) for (topic, p), key in where.items()]
        )
        runs = {key: _Run(at) for key, at in offsets.items()}
        found: dict[str, Message] = {}
        deadline = time.monotonic() + PROBE_TIMEOUT_S
        while len(found) < len(offsets):
            if time.monotonic() > deadline:
                missing = sorted(set(offsets) - set(found))
                raise RuntimeError(f"no record at {missing} within the timeout")
            message = self.consumer.poll(0.05)
            if message is None:
                continue
            if message.error() is not None:
                runs = {}  # keep nothing of a fetch that had an error: it may have a hole
                continue
            key = where.get((message.topic(), message.partition()))
            if key is None or message.offset() < offsets[key]:
                continue
            if key in runs:
                runs[key].add(message)
            found.setdefault(key, message)
        if runs:
            self._keep_delivered(where, runs)
        self.consumer.unassign()
        for key, run in runs.items():
            self._runs.setdefault(key, []).append(run)
        return found

    def _keep_delivered(self, where: Mapping[tuple[str, int], str],
                        runs: Mapping[str, _Run]) -> None:
        """Add to the runs the records the fetches already delivered (no waiting). An error
        ends the runs there: what comes after it might not follow on."""
        full: set[str] = set()
        budget = RUN_RECORDS * len(runs)  # the consumer keeps fetching: take a bounded share
        while len(full) < len(runs) and budget > 0:
            messages = self.consumer.consume(_DRAIN, 0)
            budget -= len(messages)
            for message in messages:
                if message.error() is not None:
                    return
                key = where.get((message.topic(), message.partition()))
                if key is not None and key not in full and not runs[key].add(message):
                    full.add(key)
            if len(messages) < _DRAIN:  # nothing more delivered yet: do not wait for it
                return
