"""Kafka messages of one partition into Arrow batches of the source's columns.

Raw reads copy key and value; with a record spec each value is decoded here (orjson, through
the spec) and a message that does not decode becomes an error row with the reason and the raw
text: nothing is ever dropped. Both readers use it: the ranged one on what it fetched, the
prefetching one on what the tail index kept.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from confluent_kafka import Message

from spark_jobs.contracts.records import RecordError, RecordSpec
from spark_jobs.contracts.tables import DEAD_LETTER_RAW_BYTES
from spark_jobs.streaming.kafka.json_fields import field_columns
from spark_jobs.streaming.kafka.options import SourceOptions
from spark_jobs.streaming.kafka.ranges import KafkaRange
from spark_jobs.streaming.kafka.source_schema import META_NAMES, arrow_schema

BATCH_ROWS = 10_000  # rows per Arrow batch handed to Spark
RAW_TEXT_BYTES = DEAD_LETTER_RAW_BYTES  # what an error row carries of a bad message


def received_whole(text: str | None, bound: int = RAW_TEXT_BYTES) -> bool:
    """True when `text`, an error row's `raw_value` (a message's first `bound` bytes decoded
    with replacement, None for a null message), is the whole message exactly: a null message,
    or nothing replaced and shorter than the cut, so that its UTF-8 encoding is the bytes as
    received (a valid UTF-8 decoding has one encoding). The sink then needs no read-back from
    Kafka for its dead letter."""
    if text is None:
        return True
    if "\ufffd" in text:
        return False
    try:
        return len(text.encode("utf-8")) < bound
    except UnicodeEncodeError:  # a lone surrogate: not text this decoding makes
        return False


def decoded_batches(
    options: SourceOptions, part: KafkaRange, messages: list[Message]
) -> Iterator[pa.RecordBatch]:
    """Arrow batches (of at most BATCH_ROWS) of messages already fetched from one partition."""
    schema = arrow_schema(options.record, options.json_longs, options.json_strings)
    spec = options.spec_of(part.topic)
    if spec is None:
        for first in range(0, len(messages), BATCH_ROWS):
            yield _raw_batch(messages[first:first + BATCH_ROWS], part, schema, options)
        return
    for first in range(0, len(messages), BATCH_ROWS):
        yield _record_batch(messages[first:first + BATCH_ROWS], part, spec, schema,
                            options.max_message_bytes)


def _meta_columns(
    messages: list[Message],
) -> tuple[list[str | None], list[int], list[int | None]]:
    """Key text, offset and message timestamp (ms; null if the broker has none) per message."""
    keys: list[str | None] = []
    offsets: list[int] = []
    stamps: list[int | None] = []
    for message in messages:
        key = message.key()
        keys.append(None if key is None else key.decode("utf-8", "replace"))
        offsets.append(message.offset())
        kind, stamp = message.timestamp()
        stamps.append(stamp if kind else None)
    return keys, offsets, stamps


def _constant_columns(part: KafkaRange, rows: int) -> list[pa.Array]:
    return [
        pa.array([part.topic] * rows, pa.string()),
        pa.array([part.partition] * rows, pa.int32()),
    ]


def _raw_batch(messages: list[Message], part: KafkaRange, schema: pa.Schema,
               options: SourceOptions) -> pa.RecordBatch:
    keys, offsets, stamps = _meta_columns(messages)
    values = [message.value() for message in messages]
    arrays = [
        pa.array(keys, pa.string()),
        pa.array(values, pa.binary()),
        *_constant_columns(part, len(messages)),
        pa.array(offsets, pa.int64()),
        pa.array(stamps, pa.int64()),
        *_json_columns(values, schema, options),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _json_columns(values: list[bytes | None], schema: pa.Schema, options: SourceOptions
                  ) -> list[pa.Array]:
    """The jsonLongs and jsonStrings columns, the last of `schema`."""
    columns = field_columns(values, options.json_longs, options.json_strings,
                            options.max_message_bytes)
    first = len(schema) - len(columns)
    return [pa.array(column, schema.field(first + at).type)
            for at, column in enumerate(columns)]


def _record_batch(
    messages: list[Message], part: KafkaRange, spec: RecordSpec, schema: pa.Schema,
    max_bytes: int,
) -> pa.RecordBatch:
    decode = spec.decode
    empty = (None,) * len(spec.fields)
    rows: list[tuple[Any, ...]] = []
    failures: dict[int, tuple[str, str | None]] = {}
    for index, message in enumerate(messages):
        value = message.value()
        try:
            rows.append(decode(value, max_bytes))
        except RecordError as exc:
            rows.append(empty)
            raw = None if value is None else value[:RAW_TEXT_BYTES].decode("utf-8", "replace")
            failures[index] = (str(exc), raw)
    columns = list(zip(*rows, strict=True))
    keys, offsets, stamps = _meta_columns(messages)
    errors: list[str | None] = [None] * len(messages)
    raws: list[str | None] = [None] * len(messages)
    for index, (reason, raw) in failures.items():
        errors[index] = reason
        raws[index] = raw
    by_name = dict(zip(spec.field_names, columns, strict=True))
    nulls = [None] * len(messages)
    arrays = [
        pa.array(by_name.get(field.name, nulls), field.type)
        for field in schema
        if field.name not in META_NAMES
    ]
    arrays += [
        pa.array(keys, pa.string()),
        *_constant_columns(part, len(messages)),
        pa.array(offsets, pa.int64()),
        pa.array(stamps, pa.int64()),
        pa.array(errors, pa.string()),
        pa.array(raws, pa.string()),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
