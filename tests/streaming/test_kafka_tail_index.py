"""The tail index against the broker: ends that follow the log and never pass it, event times
of the records it saw, planners that fall back to exact look-ups when it cannot answer; and
the prefetching reader (`prefetch=true`) it feeds: records handed over from memory when the
index kept them all, exact reads otherwise, every offset exactly once, exact replays."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame
from pyspark.sql.streaming.datasource import ReadAllAvailable

from spark_jobs.settings import KafkaSettings
from spark_jobs.streaming.kafka import prefetch
from spark_jobs.streaming.kafka.options import SourceOptions
from spark_jobs.streaming.kafka.prefetch import TidelineKafkaPrefetchReader
from spark_jobs.streaming.kafka.producer import make_producer, produce_all
from spark_jobs.streaming.kafka.source import read_topic
from spark_jobs.streaming.kafka.source_schema import arrow_schema
from spark_jobs.streaming.kafka.stream_reader import TidelineKafkaStreamReader
from spark_jobs.streaming.kafka.tail_index import TailIndex
from spark_jobs.streaming.kafka.timestamps import event_time_of
from spark_jobs.streaming.kafka.topic_admin import ensure_topics
from tests.helpers.topics import exact_ends, wait_for

BASE_TS = 1_767_225_600_000

pytestmark = [pytest.mark.integration, pytest.mark.kafka]


@pytest.fixture
def topic(kafka: KafkaSettings) -> str:
    name = f"tail-{uuid.uuid4().hex[:10]}"
    ensure_topics(kafka, [name], 2)
    return name


def _send(kafka: KafkaSettings, topic: str, first: int, count: int) -> None:
    numbers = range(first, first + count)
    produce_all(make_producer(kafka), topic, [str(n % 7) for n in numbers],
                [json.dumps({"n": n, "ts": BASE_TS + n}) for n in numbers])



def _index(kafka: KafkaSettings, topic: str) -> TailIndex:
    fields = {topic: "ts"}
    return TailIndex(kafka, [topic], lambda message: event_time_of(message, fields),
                     lambda t, p: str(p))


def test_ends_follow_the_log_and_never_pass_it(kafka: KafkaSettings, topic: str) -> None:
    _send(kafka, topic, 0, 30)  # before the index starts: it begins at the tail
    index = _index(kafka, topic)
    try:
        assert wait_for(lambda: index.ends() == exact_ends(kafka, topic))
        for round_ in range(5):
            _send(kafka, topic, 30 + 40 * round_, 40)
            exact = exact_ends(kafka, topic)
            seen = index.ends()
            assert seen is not None
            assert all(seen[p] <= exact[p] for p in exact), (seen, exact)
            assert wait_for(lambda: index.ends() == exact_ends(kafka, topic))
        assert index.ends(["0", "1", "2"]) is None  # a partition it does not know
    finally:
        index.close()
    assert index.ends() is None  # closed: stale, planners look the ends up themselves


def test_event_times_of_records_seen_and_none_for_older_ones(
    kafka: KafkaSettings, topic: str,
) -> None:
    _send(kafka, topic, 0, 10)
    before = exact_ends(kafka, topic)
    index = _index(kafka, topic)
    try:
        wait_for(lambda: index.ends() == before)
        _send(kafka, topic, 100, 50)
        after = wait_for(lambda: (e := index.ends()) != before and e == exact_ends(kafka, topic)
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
        final = wait_for(lambda: (e := reader.latestOffset(begin, ReadAllAvailable()))
                          == exact_ends(kafka, topic) and e)
        for part in reader.partitions(begin, final):
            assert part.start == covered[str(part.partition)]
            covered[str(part.partition)] = part.end
        assert covered == exact_ends(kafka, topic) and sum(covered.values()) == sent
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
    from spark_jobs.local.broker import EmbeddedBroker

    topic = "tail-rewound"
    first = EmbeddedBroker(port=0).start()
    kafka = make_settings(first.bootstrap).kafka
    index = None
    try:
        ensure_topics(kafka, [topic], 1)
        _send(kafka, topic, 0, 30)
        index = _index(kafka, topic)
        assert wait_for(lambda: index.ends() == {"0": 30})
        first.stop()
        with EmbeddedBroker(port=first.port):  # same address, empty log
            ensure_topics(kafka, [topic], 1)
            _send(kafka, topic, 0, 3)
            assert wait_for(lambda: index.ends() is None, timeout_s=30)
    finally:
        first.stop()
        if index is not None:
            index.close()


def test_the_index_keeps_records_from_its_start_and_forgets_released_ones(
    kafka: KafkaSettings, topic: str,
) -> None:
    _send_events(kafka, topic, 0, 20)
    before = exact_ends(kafka, topic)
    fields = {topic: "ts"}
    index = TailIndex(kafka, [topic], lambda m: event_time_of(m, fields), lambda t, p: str(p),
                      keep_records=True)
    try:
        wait_for(lambda: index.ends() == before)
        _send_events(kafka, topic, 20, 60)
        after = wait_for(lambda: (e := index.ends()) == exact_ends(kafka, topic) and e)
        for key in after:
            start, end = before[key], after[key]
            kept = index.records(key, start, end)
            assert kept is not None
            assert [m.offset() for m in kept] == list(range(start, end))
            assert all(json.loads(m.value())["user_id"] >= 20 for m in kept)
            for earlier in range(start):  # the index began near the tail: all or nothing
                found = index.records(key, earlier, end)
                assert found is None or [m.offset() for m in found] == list(range(earlier, end))
            assert index.records(key, start, end + 1) is None  # not in the log yet
        assert any(index.records(key, 0, after[key]) is None for key in after)
        index.release({key: after[key] - 1 for key in after})
        assert all(index.records(key, before[key], after[key]) is None
                   for key in after if after[key] - 1 > before[key])
        assert all([m.offset() for m in index.records(key, end - 1, end) or []] == [end - 1]
                   for key, end in after.items())
    finally:
        index.close()
    assert index.records("0", 0, 1) is None  # closed: nothing is vouched for


def test_prefetch_reads_every_offset_once_mostly_from_memory(
    kafka: KafkaSettings, topic: str,
) -> None:
    """A read loop over a growing topic: each batch's records are exactly its planned ranges,
    and once the index has caught up they come from memory, not from a new fetch."""
    _send_events(kafka, topic, 0, 30)  # older than the index: fetched exactly
    reader = TidelineKafkaPrefetchReader(SourceOptions.parse(
        {"bootstrap": kafka.bootstrap, "topic": topic, "record": "events",
         "maxRecordsPerTrigger": "40"}
    ))
    fetched: list[int] = []
    real_read_range = prefetch.read_range

    def counting(options: SourceOptions, part: Any) -> Any:
        fetched.append(part.end - part.start)
        return real_read_range(options, part)

    seen: list[int] = []
    try:
        with mock.patch.object(prefetch, "read_range", counting):
            start = reader.initialOffset()
            sent = 30
            for round_ in range(12):
                batches, end = reader.read(start)
                table = pa.Table.from_batches(list(batches), arrow_schema("events"))
                assert all(e >= int(start.get(p, 0)) for p, e in end.items())
                for p, e in end.items():
                    offsets = sorted(o for o, part in zip(
                        table["kafka_offset"].to_pylist(),
                        table["kafka_partition"].to_pylist(), strict=True) if str(part) == p)
                    assert offsets == list(range(int(start.get(p, 0)), e))
                seen += table["user_id"].to_pylist()
                start = end
                if round_ % 2 == 0:
                    _send_events(kafka, topic, sent, 25)
                    sent += 25
                time.sleep(0.15)
            final = wait_for(lambda: (r := reader.read(start)) and r[1] == exact_ends(kafka, topic)
                              and r, timeout_s=10)
            seen += pa.Table.from_batches(list(final[0]),
                                          arrow_schema("events"))["user_id"].to_pylist()
    finally:
        reader.planner.stop()
    assert sorted(seen) == list(range(sent))
    assert sum(fetched) < sent / 2, fetched  # the first rows, not the later rounds


def _collect(batches: dict[int, list[Any]]) -> Any:
    def collect(batch: DataFrame, batch_id: int) -> None:
        batches[batch_id] = batch.collect()

    return collect


@pytest.mark.spark
def test_a_prefetching_query_reads_exactly_once_and_replays_exactly(
    spark, kafka: KafkaSettings, topic: str, tmp_path: Path,
) -> None:
    """A running query fed while it runs; then its last batch uncommitted (a crash before
    the commit): the restarted query replays that batch's records exactly, then goes on."""
    checkpoint = tmp_path / "ckpt"
    batches: dict[int, list[Any]] = {}
    query = (read_topic(spark, kafka, topic, record="events", prefetch=True)
             .writeStream.foreachBatch(_collect(batches))
             .option("checkpointLocation", str(checkpoint))
             .trigger(processingTime="0 seconds").start())
    try:
        # each round is sent once the query read the one before: fed while it runs, however
        # slow a loaded machine makes its batches
        for round_ in range(6):
            _send_events(kafka, topic, 20 * round_, 20)
            wait_for(lambda n=20 * (round_ + 1): sum(len(rows) for rows in batches.values())
                     >= n, timeout_s=60)
    finally:
        query.stop()
    assert query.exception() is None
    rows = [row for b in sorted(batches) for row in batches[b]]
    assert sorted(r.user_id for r in rows) == list(range(120))
    assert len(batches) >= 3  # fed while running, not read in one go

    last = max(b for b, rows in batches.items() if rows)
    for name in [str(b) for b in range(last, max(batches) + 1)]:
        (checkpoint / "commits" / name).unlink(missing_ok=True)
        (checkpoint / "commits" / f".{name}.crc").unlink(missing_ok=True)
    _send_events(kafka, topic, 120, 10)
    again: dict[int, list[Any]] = {}
    query = (read_topic(spark, kafka, topic, record="events", prefetch=True)
             .writeStream.foreachBatch(_collect(again))
             .option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination(60)
    assert query.exception() is None

    def key(found: list[Any]) -> list[tuple[int, int, int]]:
        return sorted((r.kafka_partition, r.kafka_offset, r.user_id) for r in found)

    assert key(again[last]) == key(batches[last])
    newer = [r for b, found in again.items() if b > last for r in found]
    assert sorted(r.user_id for r in newer) == list(range(120, 130))
