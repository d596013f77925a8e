"""The exact read of one planned range, in an executor's Python worker (or the driver's).

A range is read completely or the task fails: a gap in the offsets is fine (transaction
markers, compaction) unless the log now starts after it, a retriable broker error is waited
out up to `readTimeoutMs`, and anything else (offsets deleted by retention, a recreated topic)
raises RangeReadError. The worker keeps its consumer for the partition's next range.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from spark_jobs.streaming.kafka.decoding import BATCH_ROWS, decoded_batches
from spark_jobs.streaming.kafka.options import SourceOptions
from spark_jobs.streaming.kafka.range_consumers import WORKER_CONSUMERS
from spark_jobs.streaming.kafka.ranges import KafkaRange, RangeReadError

CHUNK = 5_000  # messages per consume() call

_TRANSIENT = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._TIMED_OUT,
        KafkaError._RESOLVE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.REQUEST_TIMED_OUT,
    }
)


def read_range(options: SourceOptions, part: KafkaRange) -> Iterator[pa.RecordBatch]:
    """Yield Arrow batches of exactly the offsets [start, end) of one partition."""
    consumer = WORKER_CONSUMERS.take(options.kafka, part.topic, part.partition, part.start)
    timeout_s = options.read_timeout_ms / 1000
    complete = False
    try:
        position, end = part.start, part.end
        pending: list[Message] = []
        last_progress = time.monotonic()
        last_error: KafkaError | None = None
        while position < end:
            before = position
            messages = consumer.consume(num_messages=min(CHUNK, end - position), timeout=0.5)
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        if message.offset() >= end:
                            position = end  # the rest of the range is a gap (compaction, markers)
                        continue
                    if error.fatal() or not (error.retriable() or error.code() in _TRANSIENT):
                        raise RangeReadError(
                            f"{part.topic}/{part.partition}: cannot read offsets "
                            f"[{position}, {end}): {error} (deleted by retention, or the topic "
                            "was recreated?)"
                        )
                    last_error = error  # broker unreachable for a moment: keep trying
                    continue
                offset = message.offset()
                if offset > position:
                    _check_not_deleted(consumer, part, position)
                if offset >= end:
                    position = end
                    break
                if offset >= position:
                    pending.append(message)
                    position = offset + 1
            if position > before:
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > timeout_s:
                raise RangeReadError(
                    f"{part.topic}/{part.partition}: no progress for {timeout_s:g} s at offset "
                    f"{position}, range [{part.start}, {end}) cannot be completed "
                    f"(last error: {last_error})"
                )
            if len(pending) >= BATCH_ROWS:
                yield from decoded_batches(options, part, pending)
                pending = []
        if pending:
            yield from decoded_batches(options, part, pending)
        complete = True
    finally:
        if complete:  # kept for this partition's next range (usually the next batch's)
            WORKER_CONSUMERS.give_back(options.kafka, part.topic, part.partition, consumer)
        else:
            consumer.close()


def _check_not_deleted(consumer: Consumer, part: KafkaRange, position: int) -> None:
    """A gap in the offsets is fine (transaction markers) unless the log now starts after it."""
    low, _ = consumer.get_watermark_offsets(
        TopicPartition(part.topic, part.partition), cached=True
    )
    if low > position:
        raise RangeReadError(
            f"{part.topic}/{part.partition}: offsets [{position}, {low}) of the planned range "
            f"[{part.start}, {part.end}) were deleted (retention?) before they were read"
        )
