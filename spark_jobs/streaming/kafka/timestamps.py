"""Event time of single records at given offsets: the probe behind event-time admission control.

The event time is the JSON field named by the caller (decoded leniently: a record without a
usable field falls back to its Kafka timestamp, so a malformed message never blocks planning).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from types import TracebackType

import orjson
from confluent_kafka import Consumer, Message, TopicPartition

from spark_jobs.settings import KafkaSettings
from spark_jobs.streaming.kafka.topic_admin import planning_consumer

PROBE_TIMEOUT_S = 10.0


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
        """Event time of the record at each partition's given offset."""
        if not offsets:
            return {}
        where = {self.split_key(key): key for key in offsets}
        self.consumer.assign(
            [TopicPartition(topic, p, offsets[key]) for (topic, p), key in where.items()]
        )
        found: dict[str, int] = {}
        deadline = time.monotonic() + PROBE_TIMEOUT_S
        while len(found) < len(offsets):
            if time.monotonic() > deadline:
                missing = sorted(set(offsets) - set(found))
                raise RuntimeError(f"no record at {missing} within the timeout")
            message = self.consumer.poll(0.05)
            if message is None or message.error() is not None:
                continue
            key = where.get((message.topic(), message.partition()))
            if key is not None and key not in found and message.offset() >= offsets[key]:
                found[key] = self._event_time(message)
        self.consumer.unassign()
        return found
