"""Batch reads of the `tideline_kafka` source: `spark.read.format("tideline_kafka")`.

The shadow validation recomputes a day of training samples from the topics themselves, so it
needs a bounded, repeatable read of what the streaming job consumed. Planning fixes, for every
partition of every topic, the offsets [beginning, end offset at planning time): one Spark task
per Kafka partition, read by the streaming source's own `read_range` (same columns, same
decoding, same "fail rather than skip" on deleted data).

Optional bounds by Kafka timestamp (`startingTimestamp`, `endingTimestamp`, epoch ms, like
Spark's Kafka connector) narrow each partition to [first offset with timestamp >= start,
first offset with timestamp >= end). They are offset bounds, not a row filter: with
out-of-order producer timestamps a few rows around a bound can lie outside it, which is what
the caller's margins are for. Offsets come from `offsets_for_times`; an answer that fails a
two-record sanity check (the embedded Tansu broker ignores the timestamp and answers 0) is
replaced by a scan of the partition's timestamps, so both brokers give the same ranges.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, TopicPartition
from pyspark.sql.datasource import DataSourceReader, InputPartition

from spark_jobs.settings import KafkaSettings
from spark_jobs.streaming.kafka.options import SOURCE_NAME, SourceOptionError, SourceOptions
from spark_jobs.streaming.kafka.range_reader import read_range
from spark_jobs.streaming.kafka.ranges import KafkaRange
from spark_jobs.streaming.kafka.topic_admin import beginning_offsets, end_offsets, offsets_consumer

LOG = logging.getLogger(__name__)
STARTING_TIMESTAMP = "startingTimestamp"
ENDING_TIMESTAMP = "endingTimestamp"
LOOKUP_TIMEOUT_S = 10.0
SCAN_CHUNK = 5_000


@dataclass(frozen=True)
class TimeBounds:
    """Kafka-timestamp bounds of a batch read, [start_ms, end_ms); None = unbounded."""

    start_ms: int | None = None
    end_ms: int | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> TimeBounds:
        start = _millis(options.get(STARTING_TIMESTAMP), STARTING_TIMESTAMP)
        end = _millis(options.get(ENDING_TIMESTAMP), ENDING_TIMESTAMP)
        if start is not None and end is not None and end < start:
            raise SourceOptionError(
                f"{SOURCE_NAME}: {ENDING_TIMESTAMP} ({end}) is before {STARTING_TIMESTAMP} "
                f"({start})"
            )
        return cls(start, end)


def _millis(text: object, name: str) -> int | None:
    if text is None or str(text).strip() == "":
        return None
    try:
        value = int(str(text).strip())
    except ValueError:
        value = -1
    if value < 0:
        raise SourceOptionError(f"{SOURCE_NAME}: {name} must be epoch ms >= 0, got {text!r}")
    return value


def batch_options(options: Mapping[str, str]) -> tuple[SourceOptions, TimeBounds]:
    """The validated options of a batch read; a batch always reads from the beginning."""
    parsed = SourceOptions.parse(options)
    if parsed.starting != "earliest":
        raise SourceOptionError(
            f"{SOURCE_NAME}: a batch read starts at the beginning (or {STARTING_TIMESTAMP}); "
            f"startingOffsets={parsed.starting!r} is for streaming queries only"
        )
    return parsed, TimeBounds.parse(options)


class TidelineKafkaBatchReader(DataSourceReader):
    """Plans the ranges once (`partitions`, on the driver); `read` runs in the executors."""

    def __init__(self, options: SourceOptions, bounds: TimeBounds) -> None:
        self.options = options
        self.bounds = bounds

    def partitions(self) -> list[InputPartition]:
        return list(plan_ranges(self.options, self.bounds))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        # Spark hands a placeholder partition when the plan is empty: nothing to read.
        if not isinstance(partition, KafkaRange):
            return iter(())
        return read_range(self.options, partition)


def plan_ranges(options: SourceOptions, bounds: TimeBounds = TimeBounds()) -> list[KafkaRange]:
    """The non-empty offset range of every partition, ordered by (topic, partition)."""
    kafka = options.kafka
    ranges = []
    for topic in options.topics:
        begins = beginning_offsets(kafka, topic)
        ends = end_offsets(kafka, topic)
        firsts = dict(begins)
        stops = dict(ends)
        if bounds.start_ms is not None:
            firsts = offsets_for_time(kafka, topic, bounds.start_ms, begins, ends)
        if bounds.end_ms is not None:
            stops = offsets_for_time(kafka, topic, bounds.end_ms, begins, ends)
        for partition in sorted(ends):
            first, stop = firsts[partition], stops[partition]
            if stop > first:
                ranges.append(KafkaRange(topic, partition, first, stop))
    return ranges


def offsets_for_time(
    kafka: KafkaSettings,
    topic: str,
    ms: int,
    begins: Mapping[int, int],
    ends: Mapping[int, int],
) -> dict[int, int]:
    """Per partition, the first offset whose Kafka timestamp is >= ms (the end offset if none)."""
    consumer = offsets_consumer(kafka, **{"enable.partition.eof": True})
    try:
        asked = [TopicPartition(topic, p, ms) for p in sorted(ends)]
        answers = consumer.offsets_for_times(asked, timeout=LOOKUP_TIMEOUT_S)
        result = {}
        for answer in answers:
            p = answer.partition
            begin, end = begins.get(p, 0), ends[p]
            offset = end if answer.offset < 0 else min(max(answer.offset, begin), end)
            if not _plausible(consumer, topic, p, ms, offset, begin, end):
                LOG.info(
                    "%s/%s: the broker's offset for time %s (%s) fails the check; scanning",
                    topic, p, ms, answer.offset,
                )
                offset = _scan(consumer, topic, p, ms, begin, end)
            result[p] = offset
        return result
    finally:
        consumer.close()


def _plausible(
    consumer: Consumer, topic: str, partition: int, ms: int, offset: int, begin: int, end: int
) -> bool:
    """The record at `offset` is at or after ms and the one just before it is earlier."""
    if offset < end:
        found = _record_at(consumer, topic, partition, offset, end)
        if found is None or found[1] < ms:
            return False
    if offset > begin:
        found = _record_at(consumer, topic, partition, offset - 1, end)
        if found is None:
            return False
        if found[0] == offset - 1 and found[1] >= ms:
            return False
    return True


def _record_at(
    consumer: Consumer, topic: str, partition: int, offset: int, end: int
) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record at or after `offset`, None if there is none."""
    consumer.assign([TopicPartition(topic, partition, offset)])
    deadline = time.monotonic() + LOOKUP_TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.05)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    return None
                continue
            if message.offset() >= end:
                return None
            if message.offset() >= offset:
                return message.offset(), message.timestamp()[1]
        return None
    finally:
        consumer.unassign()


def _scan(
    consumer: Consumer, topic: str, partition: int, ms: int, begin: int, end: int
) -> int:
    """The first offset in [begin, end) with timestamp >= ms, reading timestamps in order."""
    if begin >= end:
        return end
    consumer.assign([TopicPartition(topic, partition, begin)])
    position = begin
    last_progress = time.monotonic()
    try:
        while position < end:
            messages = consumer.consume(num_messages=min(SCAN_CHUNK, end - position), timeout=0.5)
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF and message.offset() >= end:
                        return end
                    continue
                if message.offset() < position:
                    continue
                if message.offset() >= end:
                    return end
                if message.timestamp()[1] >= ms:
                    return message.offset()
                position = message.offset() + 1
                last_progress = time.monotonic()
            if time.monotonic() - last_progress > LOOKUP_TIMEOUT_S:
                raise RuntimeError(
                    f"{topic}/{partition}: no progress scanning timestamps at offset {position}"
                )
        return end
    finally:
        consumer.unassign()
