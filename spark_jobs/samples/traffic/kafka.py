"""Live feed traffic to Kafka, in real time: a message leaves when the wall clock reaches its
arrival (event time + its Kafka delay), event times start at the wall clock, and the feed
starts in its steady state (views at views_per_s from the first second; engagements, logged
when a play ends, reach their rate within a minute)."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from typing import Any

from spark_jobs.samples.traffic.sessions import Sessions
from spark_jobs.samples.traffic.spec import DEFAULT_SPEC, SamplesTrafficSpec
from spark_jobs.settings import Settings
from spark_jobs.streaming.traffic.sending import Outgoing, ProductionReport, send_paced


def produce_samples_traffic(
    settings: Settings,
    views_per_s: float,
    seconds: float,
    spec: SamplesTrafficSpec = DEFAULT_SPEC,
    stop_event: threading.Event | None = None,
    producer: Any = None,
) -> ProductionReport:
    """Send live traffic of views_per_s views per second (about twice as many messages with
    their engagements) for `seconds` or until stop_event is set. A message leaves when the
    wall clock reaches its arrival (event time + its Kafka delay), keyed by user_id, with its
    event time as the Kafka timestamp. The feed starts in its steady state (sessions already
    open), so the rate holds from the first second. Messages due after `seconds` are not
    sent. Raises GenerationError when a delivery fails."""
    if views_per_s <= 0 or seconds <= 0:
        raise ValueError("views_per_s and seconds must be positive")
    live = dataclasses.replace(spec, views_per_s=views_per_s)
    return send_paced(_live(live), settings, producer, seconds=seconds, stop_event=stop_event)


def _live(spec: SamplesTrafficSpec) -> Iterator[Outgoing]:
    """The endless steady feed from now, each message due at its arrival. Lazy: its event
    time starts when the loop takes the first message, i.e. with the loop's clock."""
    start_ms = int(time.time() * 1000)
    for event in Sessions(spec, start_ms).run(None, steady=True):
        yield Outgoing(event.topic, str(event.user_id), event.value, event.ts,
                       (event.arrival - start_ms) / 1000)
