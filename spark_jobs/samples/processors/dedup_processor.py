"""Spark adapter of the view de-duplication (core/dedup.py): view_ids in buckets, ahead of
the per-user join, so that a view_id re-sent under another user, or after its sample, is seen.

Keyed by the bucket of the view_id (streaming/bucketed/keys.py), so the job's second grouping
(by user) still sees every user's records together: the de-duplication is across users, so it
cannot share the join's key. Rows go through unchanged, as whole frames (only views are
parsed), with more columns: `first_user_id`, `first_post_id` and `first_ts` are set on a view
dropped as a duplicate (the join counts it and judges the id's engagements against its first
arrival), and the PARSED columns carry each view this step parsed, so that the join does not
parse it a second time (it parses what they leave null). Only views have state: each
view_id's first arrival (FirstArrival bytes) in its bucket's blob (streaming/bucketed/
store.py) until its ts + samples.dedup_ttl, one event-time timer per bucket at the earliest
of those. Engagements share one key per Kafka partition and pass through; so do views that
cannot be parsed (the join dead-letters them), views from the future (the join's base
dead-letters them `future`) and views behind the watermark (the join dead-letters them
`late`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import (
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)
from pyspark.sql.types import LongType, StringType, StructField, StructType

from spark_jobs.contracts.json_gate import DEFAULT_MAX_MESSAGE_BYTES
from spark_jobs.contracts.topics import TOPIC_VIEWS
from spark_jobs.samples.core.dedup import DuplicateView, FirstArrival, dedup_views
from spark_jobs.samples.core.records import Source, View, parse_view
from spark_jobs.streaming.bucketed.frames import column_values, to_frame
from spark_jobs.streaming.bucketed.keys import BUCKET_COLUMN, UNKEYED, with_bucket
from spark_jobs.streaming.bucketed.store import STATE_SCHEMA, BucketStore
from spark_jobs.streaming.event_time import FUTURE_COLUMN
from spark_jobs.streaming.processor import keep_one_timer

VIEW_KEY = "view_key"  # the grouping column (not in the output)
FIRST_USER, FIRST_POST, FIRST_TS = "first_user_id", "first_post_id", "first_ts"
_FIRST = (FIRST_USER, FIRST_POST, FIRST_TS)
# a view as this step parsed it, so the join need not parse it again (null: parse it there)
PARSED = (PARSED_VIEW_ID, PARSED_USER, PARSED_POST, PARSED_TS, PARSED_CONTEXT) = (
    "parsed_view_id", "parsed_user_id", "parsed_post_id", "parsed_ts", "parsed_context")
_PARSED_TYPES = (StringType(), LongType(), LongType(), LongType(), StringType())
_COORDINATES = ("kafka_topic", "kafka_partition", "kafka_offset", "kafka_timestamp",
                "kafka_key")


def view_key(topic: Column, value_text: Column) -> Column:
    """A view's view_id as Spark reads it; an engagement's partition behind a NUL, so that
    engagements pass through in a few groups. A view_id spelled the same only shares the
    group: the processor tells records apart by topic, and keeps state for views only."""
    return F.when(topic == TOPIC_VIEWS, F.get_json_object(value_text, "$.view_id")).otherwise(
        F.concat(F.lit("\u0000"), F.col("kafka_partition").cast("string")))


def dedup_schema(columns: StructType) -> StructType:
    """The input columns, the first arrival's user, post and ts of a duplicate view, then
    the fields of a view this step parsed."""
    return StructType([
        *columns.fields, *(StructField(name, LongType(), True) for name in _FIRST),
        *(StructField(n, t, True) for n, t in zip(PARSED, _PARSED_TYPES, strict=True))])


def parsed_view(row: Any, source: Source) -> View | None:
    """The view the de-duplication parsed for the join (PARSED columns), None if it did
    not; its raw text is the received value's, as parse_view gives it."""
    view_id = getattr(row, PARSED_VIEW_ID, None)
    if view_id is None:
        return None
    value = row.value
    text = value if isinstance(value, str) else bytes(value).decode("utf-8", "replace")
    return View(view_id, getattr(row, PARSED_USER), getattr(row, PARSED_POST),
                getattr(row, PARSED_TS), getattr(row, PARSED_CONTEXT), source, text)


class ViewDedupProcessor(StatefulProcessor):
    """The rows of a bucket of view_ids -> the same rows, duplicates marked with the first
    arrival, and the views it parsed. Its output is its input plus columns, so it keeps
    whole frames instead of per-row records.

    A transformWithStateInPandas keyed by bucket, not applyInPandasWithState as the join:
    Spark refuses two applyInPandasWithState in one query. The bucket's BucketStore is one
    value, and one event-time timer (its earliest forgetting) is kept per bucket."""

    def __init__(self, columns: StructType, ttl_ms: int,
                 join_max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        self.schema = dedup_schema(columns)
        self.columns = list(columns.fieldNames())
        self.ttl_ms = ttl_ms
        self.join_max_bytes = join_max_bytes  # views larger than this are the join's to parse
        self.buckets = 1  # set by `apply`

    def apply(self, df: DataFrame, buckets: int) -> DataFrame:
        """`df` (with VIEW_KEY) through the de-duplication, view_ids in `buckets` buckets
        (fixed by the query's checkpoint: jobs.state_buckets)."""
        self.buckets = buckets
        return with_bucket(df, VIEW_KEY, buckets).groupBy(
            BUCKET_COLUMN).transformWithStateInPandas(self, self.schema, "Append", "EventTime")

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.blob = handle.getValueState("blob", STATE_SCHEMA)

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame],
                        timerValues: TimerValues) -> Iterator[pd.DataFrame]:
        watermark = timerValues.getCurrentWatermarkInMs()
        chunks = [f for f in rows if len(f)]
        frame = pd.concat(chunks, ignore_index=True) if len(chunks) > 1 else (
            chunks[0].reset_index(drop=True) if chunks else None)
        if int(key[0]) == UNKEYED:  # no view_id: the join dead-letters these views
            yield self._out(frame, {}, {})
            return
        store = self._load(watermark)
        parsed: dict[int, View] = {}
        duplicates = {} if frame is None else self.judge(store, frame, watermark, parsed)
        self._save(store, watermark)
        yield self._out(frame, duplicates, parsed)

    def handleExpiredTimer(self, key: Any, timerValues: TimerValues,
                           expiredTimerInfo: Any) -> Iterator[pd.DataFrame]:
        watermark = timerValues.getCurrentWatermarkInMs()
        self._save(self._load(watermark), watermark)
        return iter(())

    def close(self) -> None:
        pass

    def _load(self, watermark_ms: int) -> BucketStore:
        """The bucket's first arrivals, those the watermark has passed forgotten (as
        dedup_views would forget them)."""
        stored = self.blob.get()
        store = BucketStore.from_blob(stored[0] if stored else None, self.buckets)
        for expired in list(store.due(watermark_ms)):
            store.put(expired, None, None)
        return store

    def _save(self, store: BucketStore, watermark_ms: int) -> None:
        """Keep the bucket and one timer at its earliest forgetting."""
        if store.is_empty():
            self.blob.clear()
        else:
            self.blob.update((store.to_blob(),))
        keep_one_timer(self.handle, self.handle.listTimers(), store.next_wakeup(),
                       watermark_ms)

    def judge(self, store: BucketStore, frame: pd.DataFrame, watermark_ms: int,
              parsed: dict[int, View]) -> dict[int, DuplicateView]:
        """The duplicates among the frame's views (by row position); first arrivals into
        `store`; the views parsed for the join into `parsed`. A view that does not parse, or
        whose parsed view_id is not the one Spark read, is no candidate (the join
        dead-letters it)."""
        candidates = (frame["kafka_topic"] == TOPIC_VIEWS) & frame[FUTURE_COLUMN].isna()
        if not candidates.any():
            return {}
        views = frame[candidates]
        columns = [column_values(views[name]) for name in (VIEW_KEY, "value", *_COORDINATES)]
        by_key: dict[str, list[View]] = {}
        position: dict[tuple[int, int], int] = {}
        for at, (view_id, value, *coordinates) in zip(
                views.index.tolist(), zip(*columns, strict=True), strict=True):
            record = parse_view(value, Source(*coordinates))
            if not isinstance(record, View):
                continue
            if len(value) <= self.join_max_bytes:  # the join's parse would give the same
                parsed[at] = record
            if record.view_id == view_id:
                by_key.setdefault(view_id, []).append(record)
                position[(record.source.partition, record.source.offset)] = at
        duplicates: dict[int, DuplicateView] = {}
        for view_id, key_views in by_key.items():
            payload = store.get(view_id)
            old = FirstArrival.from_bytes(payload) if payload is not None else None
            first, judged = dedup_views(old, key_views, watermark_ms, self.ttl_ms)
            for d in judged:
                if isinstance(d, DuplicateView):
                    duplicates[position[(d.source.partition, d.source.offset)]] = d
            if first != old:
                store.put(view_id, None if first is None else first.to_bytes(),
                          None if first is None else first.next_wakeup())
        return duplicates

    def _out(self, frame: pd.DataFrame | None, duplicates: dict[int, DuplicateView],
             parsed: dict[int, View]) -> pd.DataFrame:
        """The frame's own columns, the first arrival of each duplicate, the parsed views."""
        if frame is None:
            return to_frame([], self.schema)
        added: dict[str, list[Any]] = {name: [None] * len(frame) for name in (*_FIRST, *PARSED)}
        for at, d in duplicates.items():
            added[FIRST_USER][at], added[FIRST_POST][at], added[FIRST_TS][at] = (
                d.first_user_id, d.first_post_id, d.first_ts)
        for at, v in parsed.items():
            for name, field in zip(PARSED, (v.view_id, v.user_id, v.post_id, v.ts, v.context),
                                   strict=True):
                added[name][at] = field
        columns = {name: frame[name].array for name in self.columns}  # one frame, built once
        for name, data_type in zip((*_FIRST, *PARSED), (*(LongType(),) * 3, *_PARSED_TYPES),
                                   strict=True):
            columns[name] = pd.array(added[name], dtype="Int64" if isinstance(
                data_type, LongType) else object)
        return pd.DataFrame(columns, copy=False)
