"""Spark adapter of the view de-duplication (core/dedup.py): keyed by view_id, ahead of the
per-user join, so that a view_id re-sent under another user, or after its sample, is seen.

Rows go through unchanged, with three more columns: `first_user_id`, `first_post_id` and
`first_ts` are set on a view dropped as a duplicate (the join counts it and judges the id's
engagements against its first arrival). Only views have state: one blob per view_id (the
first arrival) with one event-time timer at its ts + samples.dedup_ttl, so the state lives in
the checkpoint. Engagements share one key per Kafka partition and pass through; so do views
that cannot be parsed (the join dead-letters them) and views behind the watermark (the join
dead-letters them `late`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from pyspark.sql import Column, Row
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from spark_jobs.contracts.topics import TOPIC_VIEWS
from spark_jobs.samples.core.dedup import DuplicateView, FirstArrival, dedup_views
from spark_jobs.samples.core.records import Source, View, parse_view
from spark_jobs.streaming.blob_state import BlobStateProcessor
from spark_jobs.streaming.event_time import FUTURE_COLUMN

VIEW_KEY = "view_key"  # the grouping column (not in the output)
FIRST_USER, FIRST_POST, FIRST_TS = "first_user_id", "first_post_id", "first_ts"


def view_key(topic: Column, value_text: Column) -> Column:
    """A view's view_id as Spark reads it; an engagement's partition behind a NUL, so that
    engagements pass through in a few groups. A view_id spelled the same only shares the
    group: the processor tells records apart by topic, and keeps state for views only."""
    return F.when(topic == TOPIC_VIEWS, F.get_json_object(value_text, "$.view_id")).otherwise(
        F.concat(F.lit("\u0000"), F.col("kafka_partition").cast("string")))


def dedup_schema(columns: StructType) -> StructType:
    """The input columns, then the first arrival's user, post and ts of a duplicate view."""
    return StructType([*columns.fields, *(StructField(name, LongType(), True)
                                          for name in (FIRST_USER, FIRST_POST, FIRST_TS))])


def source_of(row: Any) -> Source:
    return Source(row.kafka_topic, row.kafka_partition, row.kafka_offset, row.kafka_timestamp,
                  row.kafka_key)


class ViewDedupProcessor(BlobStateProcessor):
    """The views of one view_id -> the same rows, duplicates marked with the first arrival.
    A view from the future (FUTURE_COLUMN set) passes through without entering state: the
    join's processor base dead-letters it (its output has the dead-letter columns)."""

    checks_future = False

    def __init__(self, columns: StructType, ttl_ms: int) -> None:
        super().__init__(dedup_schema(columns))
        self.columns = tuple(columns.fieldNames())
        self.ttl_ms = ttl_ms

    def unkeyed(self, rows: Iterable[Any]) -> Iterator[Row]:
        """A view without a view_id: malformed, for the join to dead-letter."""
        return (self._out(row, None) for row in rows)

    def on_rows(self, key: Any, rows: Iterator[Row], watermark_ms: int) -> Iterator[Row]:
        rows = list(rows)
        views: list[View] = []
        for row in rows:
            if row.kafka_topic == TOPIC_VIEWS and getattr(row, FUTURE_COLUMN, None) is None:
                record = parse_view(row.value, source_of(row))
                if isinstance(record, View) and record.view_id == key[0]:
                    views.append(record)
        duplicates: dict[tuple[int, int], DuplicateView] = {}
        if views:
            payload, timer = self.state.load()
            old = FirstArrival.from_bytes(payload) if payload is not None else None
            first, judged = dedup_views(old, views, watermark_ms, self.ttl_ms)
            duplicates = {(d.source.partition, d.source.offset): d for d in judged
                          if isinstance(d, DuplicateView)}
            if first != old:  # only duplicates: nothing to write
                self._save(first, timer, watermark_ms)
        for row in rows:
            duplicate = (duplicates.get((row.kafka_partition, row.kafka_offset))
                         if row.kafka_topic == TOPIC_VIEWS else None)
            yield self._out(row, duplicate)

    def on_timer(self, key: Any, watermark_ms: int) -> Iterator[Row]:
        payload, timer = self.state.load()
        if payload is not None:
            first = FirstArrival.from_bytes(payload)
            self._save(first if first.next_wakeup() > watermark_ms else None, timer,
                       watermark_ms)
        return iter(())

    def _save(self, first: FirstArrival | None, timer: int | None, watermark_ms: int) -> None:
        if first is None:
            self.state.store(None, None, timer, watermark_ms)
        else:
            self.state.save(first, timer, watermark_ms)

    def _out(self, row: Any, duplicate: DuplicateView | None) -> Row:
        fields = {name: row[name] for name in self.columns}
        if duplicate is None:
            return Row(**fields, **{FIRST_USER: None, FIRST_POST: None, FIRST_TS: None})
        return Row(**fields, **{FIRST_USER: duplicate.first_user_id,
                                FIRST_POST: duplicate.first_post_id,
                                FIRST_TS: duplicate.first_ts})
