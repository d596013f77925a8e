"""Spark adapter of the view de-duplication (core/dedup.py): view_ids in buckets, ahead of
the per-user join, so that a view_id re-sent under another user, or after its sample, is seen.

Keyed by the bucket of the view_id (streaming/bucketed), so the job's second grouping (by
user) still sees every user's records together: the de-duplication is across users, so it
cannot share the join's key. Rows go through unchanged, as whole frames (only views are
parsed), with three more columns: `first_user_id`, `first_post_id` and `first_ts` are set on
a view dropped as a duplicate (the join counts it and judges the id's engagements against its
first arrival). Only views have state: each view_id's first arrival (FirstArrival bytes) in
its bucket's blob until its ts + samples.dedup_ttl, one event-time timeout per bucket at the
earliest of those. Engagements share one key per Kafka partition and pass through; so do
views that cannot be parsed (the join dead-letters them), views from the future (the join's
base dead-letters them `future`) and views behind the watermark (the join dead-letters them
`late`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupState
from pyspark.sql.types import LongType, StructField, StructType

from spark_jobs.contracts.topics import TOPIC_VIEWS
from spark_jobs.samples.core.dedup import DuplicateView, FirstArrival, dedup_views
from spark_jobs.samples.core.records import Source, View, parse_view
from spark_jobs.streaming.bucketed.frames import column_values, to_frame
from spark_jobs.streaming.bucketed.keys import UNKEYED
from spark_jobs.streaming.bucketed.processor import BucketedProcessor
from spark_jobs.streaming.bucketed.store import BucketStore
from spark_jobs.streaming.event_time import FUTURE_COLUMN

VIEW_KEY = "view_key"  # the grouping column (not in the output)
FIRST_USER, FIRST_POST, FIRST_TS = "first_user_id", "first_post_id", "first_ts"
_FIRST = (FIRST_USER, FIRST_POST, FIRST_TS)
_COORDINATES = ("kafka_topic", "kafka_partition", "kafka_offset", "kafka_timestamp",
                "kafka_key")


def view_key(topic: Column, value_text: Column) -> Column:
    """A view's view_id as Spark reads it; an engagement's partition behind a NUL, so that
    engagements pass through in a few groups. A view_id spelled the same only shares the
    group: the processor tells records apart by topic, and keeps state for views only."""
    return F.when(topic == TOPIC_VIEWS, F.get_json_object(value_text, "$.view_id")).otherwise(
        F.concat(F.lit("\u0000"), F.col("kafka_partition").cast("string")))


def dedup_schema(columns: StructType) -> StructType:
    """The input columns, then the first arrival's user, post and ts of a duplicate view."""
    return StructType([*columns.fields, *(StructField(name, LongType(), True)
                                          for name in _FIRST)])


class ViewDedupProcessor(BucketedProcessor[FirstArrival]):
    """The rows of a bucket of view_ids -> the same rows, duplicates marked with the first
    arrival. Its output is its input plus _FIRST, so it keeps whole frames instead of the
    base's per-row records; the base gives the bucketing, the timeout and the store."""

    key_field = VIEW_KEY
    checks_future = False  # a view from the future passes through, outside any state

    def __init__(self, columns: StructType, ttl_ms: int) -> None:
        super().__init__(dedup_schema(columns), (VIEW_KEY, *_COORDINATES, "value"))
        self.columns = list(columns.fieldNames())
        self.ttl_ms = ttl_ms

    def __call__(self, key: tuple[Any, ...], frames: Iterator[pd.DataFrame],
                 state: GroupState) -> Iterator[pd.DataFrame]:
        watermark = state.getCurrentWatermarkMs()
        chunks = [] if state.hasTimedOut else [f for f in frames if len(f)]
        frame = pd.concat(chunks, ignore_index=True) if len(chunks) > 1 else (
            chunks[0].reset_index(drop=True) if chunks else None)
        if int(key[0]) == UNKEYED:  # no view_id: the join dead-letters these views
            yield self._out(frame, {})
            return
        blob = state.getOption
        store = BucketStore.from_blob(blob[0] if blob is not None else None, self.buckets)
        for expired in list(store.due(watermark)):  # as dedup_views would forget them
            store.put(expired, None, None)
        duplicates = {} if frame is None else self.judge(store, frame, watermark)
        self._keep(state, store, watermark)
        yield self._out(frame, duplicates)

    def judge(self, store: BucketStore, frame: pd.DataFrame, watermark_ms: int
              ) -> dict[int, DuplicateView]:
        """The duplicates among the frame's views (by row position); first arrivals into
        `store`. A view that does not parse, or whose parsed view_id is not the one Spark
        read, is no candidate (the join dead-letters it)."""
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
            if isinstance(record, View) and record.view_id == view_id:
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

    def _out(self, frame: pd.DataFrame | None, duplicates: dict[int, DuplicateView]
             ) -> pd.DataFrame:
        """The frame's own columns and the first arrival of each duplicate."""
        if frame is None:
            return to_frame([], self.schema)
        out = frame[self.columns].copy()
        firsts: list[list[int | None]] = [[None] * len(frame) for _ in _FIRST]
        for at, d in duplicates.items():
            firsts[0][at], firsts[1][at], firsts[2][at] = (
                d.first_user_id, d.first_post_id, d.first_ts)
        for name, values in zip(_FIRST, firsts, strict=True):
            out[name] = pd.array(values, dtype="Int64")
        return out
