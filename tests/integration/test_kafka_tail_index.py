"""The tail index against the broker: ends that follow the log and never pass it, event times
of the records it saw, and planners that fall back to exact look-ups when it cannot answer."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from spark_jobs.config import KafkaSettings
from spark_jobs.kafka.admin import end_offsets, ensure_topics
from spark_jobs.kafka.producer import make_producer, produce_all
from spark_jobs.kafka.source import SourceOptions, TidelineKafkaStreamReader
from spark_jobs.kafka.tail_index import TailIndex
from spark_jobs.kafka.timestamps import event_time_of

BASE_TS = 1_767_225_600_000

pytestmark = pytest.mark.kafka


@pytest.fixture
def topic(kafka: KafkaSettings) -> str:
    name = f"tail-{uuid.uuid4().hex[:10]}"
    ensure_topics(kafka, [name], 2)
    return name


def _send(kafka: KafkaSettings, topic: str, first: int, count: int) -> None:
    numbers = range(first, first + count)
    produce_all(make_producer(kafka), topic, [str(n % 7) for n in numbers],
                [json.dumps({"n": n, "ts": BASE_TS + n}) for n in numbers])


def _exact(kafka: KafkaSettings, topic: str) -> dict[str, int]:
    return {str(p): n for p, n in end_offsets(kafka, topic).items()}


def _wait_for(check: Callable[[], Any], timeout_s: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


def _index(kafka: KafkaSettings, topic: str) -> TailIndex:
    fields = {topic: "ts"}
    return TailIndex(kafka, [topic], lambda message: event_time_of(message, fields),
                     lambda t, p: str(p))


def test_ends_follow_the_log_and_never_pass_it(kafka: KafkaSettings, topic: str) -> None:
    _send(kafka, topic, 0, 30)  # before the index starts: it begins at the tail
    index = _index(kafka, topic)
    try:
        assert _wait_for(lambda: index.ends() == _exact(kafka, topic))
        for round_ in range(5):
            _send(kafka, topic, 30 + 40 * round_, 40)
            exact = _exact(kafka, topic)
            seen = index.ends()
            assert seen is not None
            assert all(seen[p] <= exact[p] for p in exact), (seen, exact)
            assert _wait_for(lambda: index.ends() == _exact(kafka, topic))
        assert index.ends(["0", "1", "2"]) is None  # a partition it does not know
    finally:
        index.close()
    assert index.ends() is None  # closed: stale, planners look the ends up themselves


def test_event_times_of_records_seen_and_none_for_older_ones(
    kafka: KafkaSettings, topic: str,
) -> None:
    _send(kafka, topic, 0, 10)
    before = _exact(kafka, topic)
    index = _index(kafka, topic)
    try:
        _wait_for(lambda: index.ends() == before)
        _send(kafka, topic, 100, 50)
        after = _wait_for(lambda: (e := index.ends()) != before and e == _exact(kafka, topic)
                          and e)
        last = {p: end - 1 for p, end in after.items() if end > before[p]}
        times = index.event_times(last)
        assert set(times) == set(last)
        assert all(BASE_TS + 100 <= t < BASE_TS + 150 for t in times.values())
        older = {p: 0 for p in before if before[p] > 0}
        assert older and index.event_times(older) == {}  # sent before the index: unknown
        assert index.event_times({p: e + 5 for p, e in after.items()}) == {}  # not yet there
    finally:
        index.close()


def test_planner_uses_the_index_and_reads_everything_once(
    kafka: KafkaSettings, topic: str,
) -> None:
    """latestOffset from the index equals the exact ends once the index caught up, and a plan
    loop over a growing topic reads every offset exactly once."""
    reader = TidelineKafkaStreamReader(SourceOptions.parse(
        {"bootstrap": kafka.bootstrap, "topic": topic, "record": "events"}
    ))
    try:
        begin = reader.initialOffset()
        covered = {p: 0 for p in begin}
        sent = 0
        for round_ in range(6):
            _send_events(kafka, topic, sent, 25)
            sent += 25
            end = reader.latestOffset(begin, ReadAllAvailable())
            for part in reader.partitions(begin, end):
                assert part.start == covered[str(part.partition)]
                covered[str(part.partition)] = part.end
            begin = end
            time.sleep(0.1 * round_)
        assert reader._tail is not None and reader._tail.ends() is not None
        final = _wait_for(lambda: (e := reader.latestOffset(begin, ReadAllAvailable()))
                          == _exact(kafka, topic) and e)
        for part in reader.partitions(begin, final):
            assert part.start == covered[str(part.partition)]
            covered[str(part.partition)] = part.end
        assert covered == _exact(kafka, topic) and sum(covered.values()) == sent
    finally:
        reader.stop()
    assert reader._tail is None


def _send_events(kafka: KafkaSettings, topic: str, first: int, count: int) -> None:
    numbers = range(first, first + count)
    produce_all(make_producer(kafka), topic, [str(n % 7) for n in numbers],
                [json.dumps({"user_id": n, "event_type": "click", "ts": BASE_TS + n})
                 for n in numbers])


def test_a_log_that_goes_backwards_stops_the_index(make_settings: Callable[..., Any]) -> None:
    """A broker that restarts without its data (the embedded one keeps messages in memory):
    the index must not keep vouching for the old ends, or a planner would skip records."""
    from spark_jobs.broker import EmbeddedBroker

    topic = "tail-rewound"
    first = EmbeddedBroker(port=0).start()
    kafka = make_settings(first.bootstrap).kafka
    index = None
    try:
        ensure_topics(kafka, [topic], 1)
        _send(kafka, topic, 0, 30)
        index = _index(kafka, topic)
        assert _wait_for(lambda: index.ends() == {"0": 30})
        first.stop()
        with EmbeddedBroker(port=first.port):  # same address, empty log
            ensure_topics(kafka, [topic], 1)
            _send(kafka, topic, 0, 3)
            assert _wait_for(lambda: index.ends() is None, timeout_s=30)
    finally:
        first.stop()
        if index is not None:
            index.close()
