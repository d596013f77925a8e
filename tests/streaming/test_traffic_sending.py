"""The producing loop shared by the three traffic generators (no broker: a fake producer)."""

from __future__ import annotations

import random
import threading
import time

import pytest

from spark_jobs.streaming.traffic.popularity import Popularity
from spark_jobs.streaming.traffic.sending import GenerationError, Outgoing, send_paced


class FakeProducer:
    """Records produce() calls with their keyword arguments; fails deliveries if asked to."""

    def __init__(self, fail: bool = False) -> None:
        self.sent: list[dict] = []
        self.pending: list = []
        self.fail = fail

    def produce(self, topic, **kwargs):
        self.sent.append({"topic": topic, **kwargs, "at": time.monotonic()})
        self.pending.append(kwargs["on_delivery"])

    def poll(self, _timeout):
        pending, self.pending = self.pending, []
        for callback in pending:
            callback("broker down" if self.fail else None, None)
        return len(pending)

    def flush(self, _timeout):
        self.poll(0)
        return 0


def test_a_timestamp_is_sent_only_when_given_and_reported():
    fake = FakeProducer()
    messages = [Outgoing("t", "1", b"a"), Outgoing("t", "2", b"b", 5), Outgoing("u", None, b"c", 9)]
    report = send_paced(messages, None, fake)
    assert [m.get("timestamp") for m in fake.sent] == [None, 5, 9]
    assert "timestamp" not in fake.sent[0]
    assert [(m["topic"], m["key"], m["value"]) for m in fake.sent] == [
        ("t", "1", b"a"), ("t", "2", b"b"), ("u", None, b"c")]
    assert (report.sent, report.first_ms, report.last_ms) == (3, 5, 9)


def test_rate_draws_each_message_only_when_its_slot_came():
    drawn: list[float] = []

    def messages():
        for index in range(5):
            drawn.append(time.monotonic())
            yield Outgoing("t", str(index), b"x")

    started = time.monotonic()
    report = send_paced(messages(), None, FakeProducer(), rate=20)
    # never before its slot (the pacer sleeps only when at least 2 ms ahead)
    assert all(at - started >= index / 20 - 0.0025 for index, at in enumerate(drawn))
    assert report.sent == 5 and report.elapsed_s >= 0.19


def test_due_times_hold_messages_and_seconds_cuts_the_run():
    fake = FakeProducer()
    messages = [Outgoing("t", None, b"x", due_s=due) for due in (0.0, 0.1, 0.2, 0.5)]
    report = send_paced(messages, None, fake, seconds=0.3)
    assert report.sent == 3
    offsets = [m["at"] - fake.sent[0]["at"] for m in fake.sent]
    assert offsets[1] >= 0.09 and offsets[2] >= 0.19


def test_a_stop_event_and_a_failed_delivery_end_the_run():
    stop = threading.Event()
    stop.set()
    assert send_paced([Outgoing("t", None, b"x")], None, FakeProducer(), stop_event=stop).sent == 0
    with pytest.raises(GenerationError, match="broker down"):
        send_paced((Outgoing("t", None, b"x") for _ in range(5000)), None, FakeProducer(True))
    with pytest.raises(ValueError, match="rate"):
        send_paced([], None, FakeProducer(), rate=0)


def test_popularity_is_skewed_and_reproducible():
    def draws(seed: int) -> list[int]:
        ids = Popularity(range(1, 101), 1.0, random.Random(seed))
        rng = random.Random(seed)
        return [ids.draw(rng) for _ in range(5000)]

    first = draws(3)
    assert first == draws(3) and first != draws(4)
    top = max(set(first), key=first.count)
    assert first.count(top) > 5000 / 10  # 1 / H(100) ~ 19 %
