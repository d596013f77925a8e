"""Experiment traffic to Kafka: a finite run, a timed run, endless live traffic.

Messages go out in production order through the shared paced loop, keyed by user_id (a
user's messages keep their order in one partition), stamped with the wall clock at
production; the report counts them per topic and kind.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import Any

from spark_jobs.experiments.traffic.generate import GenerationReport, generate
from spark_jobs.experiments.traffic.messages import GeneratedRecord
from spark_jobs.experiments.traffic.spec import TrafficSpec
from spark_jobs.settings import Settings
from spark_jobs.streaming.traffic.sending import (
    LIVE_TRAFFIC_LINGER_MS,
    Outgoing,
    live_traffic_producer,
    send_paced,
)


def produce(
    spec: TrafficSpec,
    settings: Settings,
    rate: float | None = None,
    progress: bool = True,
    loop: bool = False,
    stop_event: threading.Event | None = None,
    producer: Any = None,
    from_ms: int | None = None,
) -> GenerationReport:
    """Send the spec's traffic to Kafka in production order and wait for every delivery.

    rate is in messages/s (None: as fast as possible). loop=True keeps generating later
    event time (cycle k is the spec shifted by k * duration_ms) until stop_event is set.
    Message timestamps are the wall clock at production. Raises GenerationError when any
    delivery fails. `producer` replaces the Kafka producer (tests). from_ms: only the
    traffic of event time from it on.
    """
    report = GenerationReport()
    records = generate(spec, None if loop else 1, from_ms)
    sent = send_paced(_counted(records, report), settings, producer, rate=rate,
                      stop_event=stop_event, progress=progress)
    report.elapsed_s = sent.elapsed_s
    return report


def _counted(records: Iterable[GeneratedRecord], report: GenerationReport) -> Iterator[Outgoing]:
    """The records as messages, each counted as the loop takes it (it is sent then)."""
    for record in records:
        report.add(record.topic, record.kind)
        yield Outgoing(record.topic, record.key, record.value)


def run_for(
    spec: TrafficSpec,
    settings: Settings,
    seconds: float,
    rate: float | None = None,
    progress: bool = True,
    producer: Any = None,
) -> GenerationReport:
    """Continuous generation (loop mode) for a wall-clock duration, then flush."""
    stop = threading.Event()
    timer = threading.Timer(seconds, stop.set)
    timer.daemon = True
    timer.start()
    try:
        return produce(spec, settings, rate, progress, True, stop, producer)
    finally:
        timer.cancel()


def live_disorder_ms(lateness_ms: int) -> int:
    """Disorder for live traffic: at most half the lateness, and small enough that a record
    held up to a linger longer than newer ones in another partition is still not late
    (disorder + linger <= (lateness + linger) / 2 < lateness while linger < lateness)."""
    return max(0, min(lateness_ms // 2, (lateness_ms - LIVE_TRAFFIC_LINGER_MS) // 2))


def start_live_traffic(
    spec: TrafficSpec, settings: Settings, rate: float, stop_event: threading.Event,
    from_ms: int | None = None,
) -> threading.Thread:
    """Endless paced traffic (the demo, the platform) in a daemon thread named `generator`,
    until stop_event is set, from event time from_ms on when given; its producer batches up
    to LIVE_TRAFFIC_LINGER_MS (live_traffic_producer), so build the spec with
    `live_disorder_ms`."""
    thread = threading.Thread(
        target=produce, name="generator", daemon=True,
        kwargs={"spec": spec, "settings": settings, "rate": rate, "progress": False,
                "loop": True, "stop_event": stop_event,
                "producer": live_traffic_producer(settings), "from_ms": from_ms},
    )
    thread.start()
    return thread
