"""The producing loop of every traffic generator: pacing, delivery reports, progress.

A generator hands over `Outgoing` messages; `send_paced` sends them in that order with the
project's idempotent producer (keyed, so a key's messages keep their order in one partition)
and fails loudly when any delivery fails, after waiting for every one.

Two ways to pace: `rate` gives message i the slot t0 + i / rate and draws it from the
iterator only once its slot came, so a generator may stamp the wall clock as it yields (the
fraud traffic's eventTime is the instant it leaves); a message's own `due_s` (seconds after
t0) holds it until then (the samples feed leaves when the clock reaches its arrival).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from spark_jobs.config.steps import advance
from spark_jobs.settings import Settings

FLUSH_TIMEOUT_S = 120.0
# delivery reports (of failures only: PRODUCER_DEFAULTS) are served after each sleep of the
# pacing and every so many messages, not after every message
_POLL_EVERY = 1024
# sleep only when at least this much ahead of the schedule: messages leave in bursts of up
# to 5 ms (a sleep and its wake-up cost ~60 us of CPU; every 2 ms they were half of a paced
# message's cost at 10k/s)
_AHEAD_S = 0.005

# Endless paced traffic (the demo, the platform) goes out in batches of up to 10 s: the
# embedded broker (Tansu's in-memory storage) needs longer to find an offset the more record
# batches a partition holds, and answers a fetch with nothing once that takes longer than the
# fetch's max wait (5-10 ms in the jobs' consumers: from ~9k batches; README, Platform
# findings; bench/tansu_batches.py). With the default 5 ms linger a partition receiving 50
# messages/s gets a batch per message and stalls within minutes; with 10 s it gets 360
# batches an hour, over a day (bench/platform_soak.py). Partitions flush up to a linger apart,
# so the live traffic's disorder leaves the linger room within the lateness
# (`experiments.traffic.live_disorder_ms`).
LIVE_TRAFFIC_LINGER_MS = 10_000


class Outgoing(NamedTuple):
    """One message to send. timestamp None: the producer stamps its clock at sending.
    due_s: when it may leave, in seconds after the start (None: no hold of its own)."""

    topic: str
    key: str | None
    value: bytes | None
    timestamp: int | None = None
    due_s: float | None = None


class GenerationError(RuntimeError):
    """Messages could not be delivered; the message says how many and the first reason."""


@dataclass
class ProductionReport:
    """What a run sent; first_ms and last_ms are the Kafka timestamps given (if any)."""

    sent: int = 0
    elapsed_s: float = 0.0
    first_ms: int | None = None
    last_ms: int | None = None
    max_behind_ms: float = 0.0  # how far the producer fell behind its schedule at worst

    @property
    def rate(self) -> float:
        return self.sent / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"sent": self.sent, "elapsed_s": round(self.elapsed_s, 2),
                "rate": round(self.rate, 1), "first_ms": self.first_ms, "last_ms": self.last_ms,
                "max_behind_ms": round(self.max_behind_ms, 1)}


def live_traffic_producer(settings: Settings) -> Any:
    """The producer for endless paced traffic: the project's, batching up to 10 s."""
    from spark_jobs.streaming.kafka.producer import make_producer

    return make_producer(settings.kafka, **{"linger.ms": LIVE_TRAFFIC_LINGER_MS})


class _Pacer:
    """Holds each message until its time after the start; notes how far behind it fell."""

    def __init__(self, report: ProductionReport) -> None:
        self.report = report
        self.started = time.monotonic()

    def wait(self, due_s: float) -> bool:
        """Whether it slept."""
        ahead = self.started + due_s - time.monotonic()
        if ahead >= _AHEAD_S:
            time.sleep(ahead)
            return True
        if -ahead * 1000 > self.report.max_behind_ms:
            self.report.max_behind_ms = -ahead * 1000
        return False


class _Failures(list):
    """Delivery errors, as the producer reports them (on poll and flush)."""

    def __call__(self, error: Any, _message: Any) -> None:
        if error is not None:
            self.append(error)


class _Counted:
    """The messages sent so far, passed on to the progress display when asked to."""

    def __init__(self, shown: bool) -> None:
        self.shown, self.n = shown, 0

    def update(self, count: int) -> None:
        self.n += count
        if self.shown:
            advance(count)


def send_paced(
    messages: Iterable[Outgoing],
    settings: Settings | None,
    producer: Any = None,
    rate: float | None = None,
    seconds: float | None = None,
    stop_event: threading.Event | None = None,
    progress: bool = False,
) -> ProductionReport:
    """Send `messages` in order and wait for every delivery; raises GenerationError when any
    failed. Stops early when stop_event is set or at the first message due after `seconds`.
    rate is in messages/s (None: as fast as the pacing by due_s allows). `producer` replaces
    the project's producer (made from settings.kafka). `progress`: count the messages on
    the open progress display (config.steps), if any."""
    if rate is not None and rate <= 0:
        raise ValueError(f"rate must be positive messages/s, got {rate}")
    if producer is None:
        from spark_jobs.streaming.kafka.producer import make_producer

        producer = make_producer(settings.kafka)
    report = ProductionReport()
    failures = _Failures()
    pacer = _Pacer(report)
    counted = _Counted(progress)
    try:
        _send_all(producer, iter(messages), rate, seconds, stop_event, pacer, failures, counted)
    finally:
        undelivered = producer.flush(FLUSH_TIMEOUT_S)
        counted.update(report.sent - counted.n)
        report.elapsed_s = time.monotonic() - pacer.started
    if failures:
        raise GenerationError(f"{len(failures)} message(s) not delivered; first: {failures[0]}")
    if undelivered:
        raise GenerationError(f"{undelivered} message(s) still undelivered after flush")
    return report


def _send_all(
    producer: Any,
    messages: Any,
    rate: float | None,
    seconds: float | None,
    stop_event: threading.Event | None,
    pacer: _Pacer,
    failures: _Failures,
    counted: _Counted,
) -> None:
    report = pacer.report
    while not failures and not (stop_event is not None and stop_event.is_set()):
        slept = rate is not None and pacer.wait(report.sent / rate)
        message = next(messages, None)
        if message is None:
            return
        if message.due_s is not None:
            if seconds is not None and message.due_s > seconds:
                return
            slept = pacer.wait(message.due_s) or slept
        _produce_one(producer, message, failures)
        report.sent += 1
        if message.timestamp is not None:
            if report.first_ms is None:
                report.first_ms = message.timestamp
            report.last_ms = message.timestamp
        if slept or report.sent % _POLL_EVERY == 0:
            producer.poll(0)
        if report.sent % _POLL_EVERY == 0:
            counted.update(_POLL_EVERY)


def _produce_one(producer: Any, message: Outgoing, on_delivery: _Failures) -> None:
    """produce(), waiting for queue space instead of failing when the local queue is full;
    without a timestamp of its own the message gets the producer's clock."""
    stamp = {} if message.timestamp is None else {"timestamp": message.timestamp}
    while True:
        try:
            producer.produce(message.topic, value=message.value, key=message.key,
                             on_delivery=on_delivery, **stamp)
            return
        except BufferError:
            producer.poll(0.01)
