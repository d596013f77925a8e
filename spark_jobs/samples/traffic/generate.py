"""Pure generation: the feed's messages in Kafka order, seeded (the same spec gives the same
messages, byte for byte, in the same order), and what the mix holds."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import orjson

from spark_jobs.contracts.topics import TOPIC_VIEWS
from spark_jobs.samples.traffic.sessions import MALFORMED, STRAY, Sessions
from spark_jobs.samples.traffic.spec import DEFAULT_SPEC, SamplesTrafficSpec
from spark_jobs.streaming.traffic import DEFAULT_START_MS


class Record(NamedTuple):
    """One Kafka message: key is str(user_id), timestamp the event time (ms)."""

    topic: str
    key: str | None
    value: bytes
    timestamp: int


def annotated_traffic(spec: SamplesTrafficSpec = DEFAULT_SPEC, views: int | None = 1000,
                      start_ms: int = DEFAULT_START_MS) -> Iterator[tuple[Record, str]]:
    """Messages in Kafka order with what each one is (one of KINDS); `views` views and their
    engagements (endless when None)."""
    for event in Sessions(spec, start_ms).run(views):
        yield Record(event.topic, str(event.user_id), event.value, event.ts), event.kind


def generate_traffic(spec: SamplesTrafficSpec = DEFAULT_SPEC, views: int = 1000,
                     start_ms: int = DEFAULT_START_MS) -> list[Record]:
    """`views` views and their engagements as (topic, key, value, timestamp) in Kafka order."""
    return [record for record, _ in annotated_traffic(spec, views, start_ms)]


def generate_views(spec: SamplesTrafficSpec = DEFAULT_SPEC, views: int = 1000,
                   start_ms: int = DEFAULT_START_MS) -> list[dict[str, Any]]:
    """The view objects alone (event order within a session), e.g. to build samples from."""
    found: list[dict[str, Any]] = []
    for _ in Sessions(spec, start_ms).run(views, collect=found):
        pass
    return found


def traffic_mix(annotated: Iterable[tuple[Record, str]]) -> Counter[str]:
    """Messages per kind, plus `before_view`: engagements that precede their view in Kafka
    order, and `displaced`: messages with an event time below one already sent."""
    mix: Counter[str] = Counter()
    sent_views: set[str] = set()
    waiting: Counter[str] = Counter()
    highest = None
    for record, kind in annotated:
        mix[kind] += 1
        if highest is not None and record.timestamp < highest:
            mix["displaced"] += 1
        highest = record.timestamp if highest is None else max(highest, record.timestamp)
        if kind in (MALFORMED, STRAY):
            continue
        view_id = orjson.loads(record.value).get("view_id")
        if record.topic == TOPIC_VIEWS:
            sent_views.add(view_id)
            mix["before_view"] += waiting.pop(view_id, 0)
        elif view_id is not None and view_id not in sent_views:
            waiting[view_id] += 1
    return mix
