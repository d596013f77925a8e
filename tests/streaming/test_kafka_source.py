"""The tideline_kafka streaming source: exactly-once ranges, limits, decoding, restarts, replay."""

from __future__ import annotations

import itertools
import json
import time as clock
import uuid
from pathlib import Path
from unittest import mock

import pytest
from pyspark.sql import DataFrame, Row
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from spark_jobs.contracts.records import EVENT, SPECS, RecordError
from spark_jobs.settings import KafkaSettings
from spark_jobs.streaming.kafka.options import SourceOptionError, SourceOptions
from spark_jobs.streaming.kafka.producer import make_producer, produce_all
from spark_jobs.streaming.kafka.range_consumers import RangeConsumers
from spark_jobs.streaming.kafka.range_reader import read_range
from spark_jobs.streaming.kafka.ranges import KafkaRange, RangeReadError
from spark_jobs.streaming.kafka.source import read_topic
from spark_jobs.streaming.kafka.source_schema import arrow_schema, source_schema
from spark_jobs.streaming.kafka.stream_reader import TidelineKafkaStreamReader, split_limit
from spark_jobs.streaming.kafka.topic_admin import end_offsets, ensure_topics

pytestmark = pytest.mark.integration

BASE_TS = 1_767_225_600_000


@pytest.fixture
def topic(kafka: KafkaSettings) -> str:
    name = f"src-{uuid.uuid4().hex[:10]}"
    ensure_topics(kafka, [name], 2)
    return name


def _produce(
    kafka: KafkaSettings, topic: str, first: int, count: int
) -> list[tuple[str, str, int]]:
    """Records first..first+count-1: key n % 5 as text (keys on both partitions), ts BASE_TS + n."""
    records = [
        (str(n % 5), json.dumps({"user_id": n, "event_type": "click", "ts": BASE_TS + n}))
        for n in range(first, first + count)
    ]
    records = [(key, value, BASE_TS + first + i) for i, (key, value) in enumerate(records)]
    produce_all(
        make_producer(kafka),
        topic,
        [r[0] for r in records],
        [r[1] for r in records],
        [r[2] for r in records],
    )
    return records


def _run_available_now(df: DataFrame, checkpoint: Path) -> dict[int, list[Row]]:
    """Run the query to completion with availableNow; rows collected per batch id."""
    batches: dict[int, list[Row]] = {}

    def collect(batch: DataFrame, batch_id: int) -> None:
        batches[batch_id] = batch.collect()

    query = (
        df.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert not query.isActive
    assert query.exception() is None
    return batches


def _all_rows(batches: dict[int, list[Row]]) -> list[Row]:
    return [row for batch_id in sorted(batches) for row in batches[batch_id]]


# -- pure planning and option handling ----------------------------------------------------


def test_split_limit_is_proportional_and_exact() -> None:
    assert split_limit({"0": 5, "1": 3}, 100) == {"0": 5, "1": 3}
    assert split_limit({"0": 900, "1": 100}, 100) == {"0": 90, "1": 10}
    assert split_limit({"0": 1000, "1": 1, "2": 0}, 10) == {"0": 9, "1": 1, "2": 0}
    assert split_limit({"0": 7, "1": 7, "2": 7}, 2) == {"0": 1, "1": 1, "2": 0}
    for available, limit in [({"0": 13, "1": 29, "2": 5}, 17), ({"0": 3, "1": 3}, 5)]:
        take = split_limit(available, limit)
        assert sum(take.values()) == limit
        assert all(0 < take[p] <= available[p] for p in available)


def test_options_are_validated() -> None:
    good = {"bootstrap": "h:1", "topic": "t"}
    assert SourceOptions.parse(good).starting == "earliest"
    for bad, message in [
        ({"topic": "t"}, "'bootstrap' is required"),
        ({"bootstrap": "h:1"}, "'topic' is required"),
        ({**good, "record": "nope"}, "unknown record"),
        ({**good, "maxRecordsPerTrigger": "0"}, "positive integer"),
        ({**good, "maxRecordsPerTrigger": "ten"}, "positive integer"),
        ({**good, "startingOffsets": "middle"}, "earliest or latest"),
        ({**good, "client": "{nope"}, "not JSON"),
        ({**good, "client": "[1]"}, "JSON object"),
        ({**good, "record": "events", "jsonLongs": "ts"}, "for raw reads"),
        ({**good, "jsonLongs": "ts,value"}, "other than the raw columns"),
        ({**good, "jsonLongs": "ts,a-b"}, "field names"),
        ({**good, "jsonLongs": "ts,ts"}, "twice"),
        ({**good, "jsonLongs": "ts,TS"}, "twice"),  # Spark's columns ignore case
        ({**good, "jsonLongs": "Value"}, "other than the raw columns"),
        ({**good, "record": "events", "jsonStrings": "v"}, "jsonStrings is for raw reads"),
        ({**good, "jsonStrings": "v,kafka_key"}, "other than the raw columns"),
        ({**good, "jsonStrings": "v,V"}, "jsonStrings names a field twice"),
        ({**good, "jsonLongs": "ts,id", "jsonStrings": "ID"}, r"both name \['id'\]"),
    ]:
        with pytest.raises(SourceOptionError, match=message):
            SourceOptions.parse(bad)
    fields = SourceOptions.parse({**good, "jsonLongs": " ts , user_id ", "jsonStrings": "v"})
    assert (fields.json_longs, fields.json_strings) == (("ts", "user_id"), ("v",))
    assert SourceOptions.parse(fields.as_spark_options()) == fields
    assert SourceOptions.parse(good).json_longs == SourceOptions.parse(good).json_strings == ()


@pytest.mark.parametrize("record", [None, *SPECS])
def test_arrow_schema_matches_what_spark_checks(record: str | None) -> None:
    assert arrow_schema(record).equals(to_arrow_schema(source_schema(record), timezone="UTC"))
    if record is None:
        longs, strings = ("ts", "user_id"), ("view_id",)
        assert arrow_schema(None, longs, strings).equals(
            to_arrow_schema(source_schema(None, longs, strings), timezone="UTC"))
        assert source_schema(None, longs, strings).fieldNames()[-3:] == [*longs, *strings]


# -- reader against the broker (no Spark) -------------------------------------------------


@pytest.mark.kafka
def test_available_now_target_and_limits(kafka: KafkaSettings, topic: str) -> None:
    _produce(kafka, topic, 0, 20)
    options = SourceOptions.parse({"bootstrap": kafka.bootstrap, "topic": topic})
    reader = TidelineKafkaStreamReader(options)
    start = reader.initialOffset()
    assert start == {"0": 0, "1": 0}
    reader.prepareForTriggerAvailableNow()
    target = {str(p): n for p, n in end_offsets(kafka, topic).items()}
    _produce(kafka, topic, 20, 10)  # arrives after the query started: not read
    assert reader.latestOffset(start, ReadAllAvailable()) == target
    limited = reader.latestOffset(start, ReadMaxRows(6))
    assert 0 < sum(limited.values()) <= 6  # cut back to a common event time (event_time_split)
    assert reader.latestOffset(target, ReadMaxRows(6)) == target  # nothing left: stop

    latest = TidelineKafkaStreamReader(
        SourceOptions.parse(
            {"bootstrap": kafka.bootstrap, "topic": topic, "startingOffsets": "latest"}
        )
    )
    assert sum(latest.initialOffset().values()) == 30
    ranges = reader.partitions({"0": 0}, {"0": 2, "1": 3})  # partition 1 starts at its beginning
    assert [(r.partition, r.start, r.end) for r in ranges] == [(0, 0, 2), (1, 0, 3)]


@pytest.mark.kafka
def test_range_past_the_end_fails_instead_of_skipping(kafka: KafkaSettings, topic: str) -> None:
    _produce(kafka, topic, 0, 4)
    ends = end_offsets(kafka, topic)
    options = SourceOptions.parse(
        {"bootstrap": kafka.bootstrap, "topic": topic, "readTimeoutMs": "500"}
    )
    partition = max(ends, key=lambda p: ends[p])
    with pytest.raises(RangeReadError, match="cannot be completed"):
        list(read_range(options, KafkaRange(topic, partition, 0, ends[partition] + 3)))


@pytest.mark.kafka
def test_a_worker_reads_its_ranges_with_kept_consumers_and_every_range_exactly(
    kafka: KafkaSettings, topic: str,
) -> None:
    """A worker keeps the consumer of a range read to the end for that partition's next range,
    whatever its start (the next batch's, an earlier one on a replay); each range reads
    exactly its offsets; the least recently used consumer beyond the pool's size is closed."""
    _produce(kafka, topic, 0, 40)
    ends = end_offsets(kafka, topic)
    partition = max(ends, key=lambda p: ends[p])
    end = ends[partition]
    options = SourceOptions.parse({"bootstrap": kafka.bootstrap, "topic": topic})
    pool = RangeConsumers(max_idle=1)

    def offsets(start: int, stop: int, of: int = partition) -> list[int]:
        with mock.patch("spark_jobs.streaming.kafka.range_reader.WORKER_CONSUMERS", pool):
            batches = list(read_range(options, KafkaRange(topic, of, start, stop)))
        return [o for b in batches for o in b.column("kafka_offset").to_pylist()]

    middle = end // 2
    assert offsets(0, middle) == list(range(0, middle))
    [kept] = pool._idle.values()
    assert offsets(middle, end) == list(range(middle, end))  # the kept consumer, reassigned
    assert list(pool._idle.values()) == [kept]
    assert offsets(1, 4) == [1, 2, 3]  # backwards: re-assigned, nothing skipped or repeated
    assert offsets(4, end) == list(range(4, end))
    other = 1 - partition
    if ends[other]:
        assert offsets(0, ends[other], other) == list(range(ends[other]))
        assert len(pool._idle) == 1 and kept not in pool._idle.values()  # least recent closed
    pool.close()


# -- streaming queries --------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.kafka
def test_raw_read_exactly_once_in_limited_batches(
    spark, kafka: KafkaSettings, topic: str, tmp_path: Path
) -> None:
    records = _produce(kafka, topic, 0, 30)
    df = read_topic(spark, kafka, topic, max_records_per_trigger=8)
    assert df.schema == source_schema(None)
    batches = _run_available_now(df, tmp_path / "ckpt")

    assert len(batches) >= 4
    assert all(0 < len(rows) <= 8 for rows in batches.values())
    ordered = [batches[b] for b in sorted(batches)]
    for rows in ordered[:3]:
        assert {row.kafka_partition for row in rows} == {0, 1}  # the limit is split
    for earlier, later in itertools.pairwise(ordered):
        # partitions are cut at one event time: batches do not overlap in time
        assert max(r.kafka_timestamp for r in earlier) < min(r.kafka_timestamp for r in later)
    rows = _all_rows(batches)
    by_value = {r[1]: r for r in records}
    assert sorted(row.value.decode() for row in rows) == sorted(by_value)
    ends = end_offsets(kafka, topic)
    for partition in (0, 1):
        offsets = sorted(r.kafka_offset for r in rows if r.kafka_partition == partition)
        assert offsets == list(range(ends[partition]))
    for row in rows:
        key, _, ts = by_value[row.value.decode()]
        assert (row.kafka_key, row.kafka_topic, row.kafka_timestamp) == (key, topic, ts)
    partition_of_key = {(row.kafka_key, row.kafka_partition) for row in rows}
    assert len(partition_of_key) == 5  # one partition per key


@pytest.mark.spark
@pytest.mark.kafka
@pytest.mark.parametrize("prefetch", [False, True])
def test_raw_read_with_json_fields_reads_the_fields_of_each_message(
    spark, kafka: KafkaSettings, topic: str, tmp_path: Path, prefetch: bool
) -> None:
    records = _produce(kafka, topic, 0, 6)
    hostile = [b'{"ts": "17", "user_id": 1.5, "event_type": 3}', b"not json",
               b'{"a": {"ts": 3}}']
    produce_all(make_producer(kafka), topic, ["h"] * 3, hostile, [BASE_TS + 10] * 3)
    df = read_topic(spark, kafka, topic, prefetch=prefetch, json_longs=["ts", "user_id"],
                    json_strings=["event_type"])
    assert df.schema == source_schema(None, ("ts", "user_id"), ("event_type",))
    rows = _all_rows(_run_available_now(df, tmp_path / "ckpt"))
    read = {row.value: (row.ts, row.user_id, row.event_type) for row in rows}
    expected = {value.encode(): tuple(json.loads(value)[name]
                                      for name in ("ts", "user_id", "event_type"))
                for _, value, _ in records}
    expected.update({value: (None, None, None) for value in hostile})
    assert read == expected


@pytest.mark.spark
@pytest.mark.kafka
def test_record_mode_decodes_and_keeps_bad_messages(
    spark, kafka: KafkaSettings, topic: str, tmp_path: Path
) -> None:
    good = [
        json.dumps({"user_id": n, "event_type": "view", "ts": BASE_TS + n, "x": 1})
        for n in range(6)
    ]
    bad = [
        b"{not json",
        json.dumps({"user_id": 1, "ts": BASE_TS}).encode(),
        json.dumps({"user_id": "1", "event_type": "view", "ts": BASE_TS}).encode(),
        b"[1, 2]",
        b"\xff\xfe garbage",
    ]
    values: list[bytes] = [good[0].encode(), *bad[:2], good[1].encode(), *bad[2:]]
    values += [g.encode() for g in good[2:]]
    produce_all(make_producer(kafka), topic, ["7"] * len(values), values)

    df = read_topic(spark, kafka, topic, record="events")
    assert df.schema == source_schema("events")
    assert df.schema.fieldNames()[:3] == ["user_id", "event_type", "ts"]
    rows = _all_rows(_run_available_now(df, tmp_path / "ckpt"))
    assert len(rows) == len(values)
    assert sorted(r.kafka_offset for r in rows) == list(range(len(values)))  # one partition

    decoded = sorted((r.user_id, r.event_type, r.ts) for r in rows if r.error is None)
    assert decoded == [(n, "view", BASE_TS + n) for n in range(6)]
    assert all(r.raw_value is None and r.kafka_key == "7" for r in rows if r.error is None)

    errors = {r.raw_value: r for r in rows if r.error is not None}
    assert len(errors) == len(bad)
    for value in bad:
        row = errors[value.decode("utf-8", "replace")]
        assert (row.user_id, row.event_type, row.ts) == (None, None, None)
        with pytest.raises(RecordError) as expected:
            EVENT.decode(value)
        assert row.error == str(expected.value)
    reasons = sorted(r.error.split(":")[0] for r in errors.values())
    assert reasons == sorted(
        [
            "not valid JSON",
            "not valid JSON",
            "missing field 'event_type'",
            "field 'user_id' must be an integer, got string",
            "not a JSON object",
        ]
    )


@pytest.mark.spark
@pytest.mark.kafka
def test_restart_reads_only_new_records(
    spark, kafka: KafkaSettings, topic: str, tmp_path: Path
) -> None:
    checkpoint = tmp_path / "ckpt"
    _produce(kafka, topic, 0, 10)
    first = _all_rows(_run_available_now(read_topic(spark, kafka, topic), checkpoint))
    assert len(first) == 10
    _produce(kafka, topic, 10, 7)
    second = _all_rows(_run_available_now(read_topic(spark, kafka, topic), checkpoint))
    assert len(second) == 7
    seen = {(r.kafka_partition, r.kafka_offset) for r in first + second}
    assert len(seen) == 17
    assert sorted(json.loads(r.value)["user_id"] for r in second) == list(range(10, 17))


@pytest.mark.spark
@pytest.mark.kafka
def test_uncommitted_batch_replays_the_same_range(
    spark, kafka: KafkaSettings, topic: str, tmp_path: Path
) -> None:
    checkpoint = tmp_path / "ckpt"
    _produce(kafka, topic, 0, 20)
    first = _run_available_now(
        read_topic(spark, kafka, topic, max_records_per_trigger=6), checkpoint
    )
    assert len(first) >= 4
    last = max(first)
    # Crash after planning (offsets/3 written) but before the commit of batch 3.
    for name in (str(last), f".{last}.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    _produce(kafka, topic, 20, 5)

    again = _run_available_now(
        read_topic(spark, kafka, topic, max_records_per_trigger=6), checkpoint
    )
    assert min(again) == last

    def key(rows: list[Row]) -> list[tuple[int, int, bytes]]:
        return sorted((r.kafka_partition, r.kafka_offset, bytes(r.value)) for r in rows)

    assert key(again[last]) == key(first[last])
    newer = [row for batch_id, rows in again.items() if batch_id > last for row in rows]
    assert sorted(json.loads(r.value)["user_id"] for r in newer) == list(range(20, 25))


def test_topics_read_together_wait_for_the_slower_one_until_it_is_idle(
    kafka: KafkaSettings,
) -> None:
    """Two topics in one source: the one ahead in event time is cut back to the other's time,
    and held there while the other has nothing new, until the idle timeout passes."""
    ahead, behind = f"src-a-{uuid.uuid4().hex[:8]}", f"src-b-{uuid.uuid4().hex[:8]}"
    ensure_topics(kafka, [ahead, behind], 2)
    producer = make_producer(kafka)

    def send(topic: str, times: range) -> None:
        values = [json.dumps({"user_id": t, "event_type": "click", "ts": BASE_TS + t})
                  for t in times]
        produce_all(producer, topic, [str(t) for t in times], values)

    send(ahead, range(0, 100))
    send(behind, range(0, 50, 5))
    options = SourceOptions.parse({
        "bootstrap": kafka.bootstrap, "topic": f"{ahead},{behind}", "record": "events",
        "idleTimeoutMs": "800",
    })
    reader = TidelineKafkaStreamReader(options)
    start = reader.initialOffset()

    def read_upto(end: dict[str, int], begin: dict[str, int]) -> list[int]:
        rows = []
        for part in reader.partitions(begin, end):
            for batch in read_range(options, part):
                rows += batch.column("ts").to_pylist()
        return sorted(t - BASE_TS for t in rows)

    try:
        got, begin = [], start
        while (end := reader.latestOffset(begin, ReadAllAvailable())) != begin:
            got += read_upto(end, begin)  # until `behind` is read and `ahead` is held at its time
            begin = end
        assert sorted(got) == sorted([*range(0, 46), *range(0, 50, 5)])
        clock.sleep(1.0)  # `behind` has been idle longer than the timeout: stop waiting for it
        rest = []
        while (end := reader.latestOffset(begin, ReadAllAvailable())) != begin:
            rest += read_upto(end, begin)
            begin = end
        assert sorted(rest) == list(range(46, 100))
    finally:
        reader.stop()  # its tail index's consumer


@pytest.mark.kafka
def test_a_small_topic_far_behind_is_read_whole_not_a_share_per_batch(
    kafka: KafkaSettings,
) -> None:
    """Ten records of one topic before 600 of another, limit 200: the first plan takes the
    ten (not their proportional share of 3, which cut the other topic to nothing batch after
    batch: fraud_rules read one rule per micro-batch), the next ones fill the limit."""
    small, big = f"src-s-{uuid.uuid4().hex[:8]}", f"src-b-{uuid.uuid4().hex[:8]}"
    ensure_topics(kafka, [small], 1)
    ensure_topics(kafka, [big], 2)
    producer = make_producer(kafka)

    def send(topic: str, times: range) -> None:
        values = [json.dumps({"user_id": t, "event_type": "click", "ts": BASE_TS + t})
                  for t in times]
        produce_all(producer, topic, [str(t) for t in times], values)

    send(small, range(10))
    send(big, range(1_000, 1_600))
    options = SourceOptions.parse({"bootstrap": kafka.bootstrap, "topic": f"{small},{big}",
                                   "record": "events"})
    reader = TidelineKafkaStreamReader(options)
    try:
        begin = reader.initialOffset()
        reader.prepareForTriggerAvailableNow()
        plans = []
        while (end := reader.latestOffset(begin, ReadMaxRows(200))) != begin:
            read = {topic: 0 for topic in (small, big)}
            for key in end:
                read[options.split_key(key)[0]] += int(end[key]) - int(begin.get(key, 0))
            plans.append((read[small], read[big]))
            begin = end
        assert plans[0] == (10, 0)  # the small topic in one plan, not a share per batch
        assert sum(b for _, b in plans) == 600 and all(b <= 200 for _, b in plans)
    finally:
        reader.stop()


@pytest.mark.kafka
@pytest.mark.parametrize("one_plan", [True, False])
def test_an_available_now_run_of_a_stateful_query_reads_its_remainder_in_one_plan(
        kafka: KafkaSettings, one_plan: bool) -> None:
    """Two topics far apart in event time, no limit: while streaming the one ahead waits for
    the other (above). In an available-now run of a stateful query nothing comes later, so
    one plan takes all (Spark's batch without data then commits its watermark); without the
    option (a stateless query runs no such batch) the run keeps its aligned batches."""
    ahead, behind = f"src-a-{uuid.uuid4().hex[:8]}", f"src-b-{uuid.uuid4().hex[:8]}"
    ensure_topics(kafka, [ahead, behind], 2)
    producer = make_producer(kafka)
    for topic, times in ((ahead, range(0, 100)), (behind, range(0, 50, 5))):
        produce_all(producer, topic, [str(t) for t in times],
                    [json.dumps({"user_id": t, "event_type": "click", "ts": BASE_TS + t})
                     for t in times])
    options = SourceOptions.parse({"bootstrap": kafka.bootstrap, "topic": f"{ahead},{behind}",
                                   "record": "events",
                                   "availableNowInOnePlan": str(one_plan).lower()})
    assert options.available_now_in_one_plan is one_plan
    assert SourceOptions.parse(options.as_spark_options()) == options
    reader = TidelineKafkaStreamReader(options)
    try:
        begin = reader.initialOffset()
        streaming = reader.latestOffset(begin, ReadAllAvailable())
        assert sum(map(int, streaming.values())) < 110, "streaming: the topic ahead waits"
        reader.prepareForTriggerAvailableNow()
        end = reader.latestOffset(begin, ReadAllAvailable())
        taken = sum(int(end[k]) - int(begin.get(k, 0)) for k in end)
        assert (taken == 110) if one_plan else (taken < 110), taken
        fits = reader.latestOffset(begin, ReadMaxRows(200))  # as jobs run: always a limit
        taken = sum(int(fits[k]) - int(begin.get(k, 0)) for k in fits)
        assert (taken == 110) if one_plan else (taken < 110), taken
        limited = reader.latestOffset(begin, ReadMaxRows(50))
        assert sum(int(limited[k]) - int(begin.get(k, 0)) for k in limited) <= 50, \
            "a limited plan is still cut"
    finally:
        reader.stop()


def test_available_now_in_one_plan_is_a_flag() -> None:
    with pytest.raises(SourceOptionError, match="availableNowInOnePlan must be true or false"):
        SourceOptions.parse({"bootstrap": "127.0.0.1:9", "topic": "t",
                             "availableNowInOnePlan": "yes"})
