"""A seeded day of training-samples traffic on the broker, closed by a view of the next day
whose event time moves the watermark past every window of the day (the chaos and cluster
tests compare the job's samples for that day with its batch recomputation)."""

from __future__ import annotations

import json

from spark_jobs.catalog import system_topics
from spark_jobs.contracts.topics import TOPIC_ENGAGEMENTS, TOPIC_VIEWS
from spark_jobs.samples.traffic import SamplesTrafficSpec, generate_traffic
from spark_jobs.settings import Settings
from spark_jobs.streaming.kafka.producer import make_producer, produce_all
from spark_jobs.streaming.kafka.topic_admin import ensure_topics

T0 = 1_767_225_600_000  # 2026-01-01
DAY_MS = 86_400_000
HOUR_MS = 3_600_000


def produce_closed_day(settings: Settings, spec: SamplesTrafficSpec, views: int) -> set[str]:
    """The topics made, `views` views of 2026-01-01 (from 01:00) and their engagements sent,
    then the next day's clock view; returns the day's view ids."""
    kafka = settings.kafka
    ensure_topics(kafka, system_topics("samples"), kafka.partitions)
    records = generate_traffic(spec, views=views, start_ms=T0 + HOUR_MS)
    tomorrow = T0 + DAY_MS + HOUR_MS
    clock = {"view_id": "clock", "user_id": 0, "post_id": 0, "ts": tomorrow}
    records.append((TOPIC_VIEWS, "0", json.dumps(clock).encode(), tomorrow))
    producer = make_producer(kafka)
    for topic in (TOPIC_VIEWS, TOPIC_ENGAGEMENTS):
        mine = [r for r in records if r[0] == topic]
        produce_all(producer, topic, [r[1] for r in mine], [r[2] for r in mine],
                    [r[3] for r in mine])
    return {json.loads(r[2])["view_id"] for r in records[:-1] if r[0] == TOPIC_VIEWS}
