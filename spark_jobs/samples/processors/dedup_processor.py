"""Spark adapter of the view de-duplication (core/dedup.py): view_ids in buckets, ahead of
the per-user join, so that a view_id re-sent under another user, or after its sample, is seen.

Keyed by the bucket of the view_id (streaming/bucketed/keys.py), so the job's second grouping
(by user) still sees every user's records together: the de-duplication is across users, so it
cannot share the join's key. Rows go through unchanged, as whole frames (only views are
parsed), with more columns: `first_user_id`, `first_post_id` and `first_ts` are set on a view
dropped as a duplicate (the join counts it and judges the id's engagements against its first
arrival), and the PARSED columns carry each view this step parsed, so that the join does not
parse it a second time (it parses what they leave null). Only views have state: each
view_id's first arrival (ts, user_id, post_id) is its own entry of its bucket's MapState,
written when it arrives and removed once the watermark passes ts + samples.dedup_ttl, so a
micro-batch writes its new first arrivals only, not the whole ttl's view_ids. A bucket's
view_ids are read, and its new first arrivals written, in pipelined chunks
(streaming/map_state_batch.py): one state-server round trip per view_id was most of this
step's time. When to
remove them is an index by expiry slot (expiry_ring.py: a ring of ListStates appended to, one
event-time timer per bucket at the earliest slot's end); Spark's own state TTL does not fit,
being processing time, and the ttl here is event time. Engagements share one key per Kafka
partition and pass through; so do views that cannot be parsed (the join dead-letters them),
views from the future (the join's base dead-letters them `future`) and views behind the
watermark (the join dead-letters them `late`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import (
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

from spark_jobs.contracts.json_gate import DEFAULT_MAX_MESSAGE_BYTES
from spark_jobs.contracts.topics import TOPIC_VIEWS
from spark_jobs.samples.core.dedup import DuplicateView, FirstArrival, dedup_views
from spark_jobs.samples.core.records import Source, View, parse_view
from spark_jobs.samples.processors.expiry_ring import RING_SIZE, ExpiryRing, slot_ms
from spark_jobs.streaming.bucketed.frames import column_values, to_frame
from spark_jobs.streaming.bucketed.keys import BUCKET_COLUMN, UNKEYED, with_bucket
from spark_jobs.streaming.event_time import FUTURE_COLUMN
from spark_jobs.streaming.map_state_batch import get_values, update_values

if TYPE_CHECKING:  # pandas is imported where frames are built: the driver's state-schema
    import pandas as pd  # worker loads this module at every query start, without pandas

VIEW_KEY = "view_key"  # the grouping column (not in the output)
VIEW_ID = "view_id"  # a view's view_id as the source read it (a JSON string, or null)
FIRST_USER, FIRST_POST, FIRST_TS = "first_user_id", "first_post_id", "first_ts"
_FIRST = (FIRST_USER, FIRST_POST, FIRST_TS)
# a view as this step parsed it, so the join need not parse it again (null: parse it there)
PARSED = (PARSED_VIEW_ID, PARSED_USER, PARSED_POST, PARSED_TS, PARSED_CONTEXT) = (
    "parsed_view_id", "parsed_user_id", "parsed_post_id", "parsed_ts", "parsed_context")
_PARSED_TYPES = (StringType(), LongType(), LongType(), LongType(), StringType())
# the state: view_id -> its first arrival, and the expiry index's entries (view_id, ts)
_VIEW_ID = StructType([StructField("view_id", StringType(), False)])
_FIRST_ARRIVAL = StructType([StructField(n, LongType(), False)
                             for n in ("ts", "user_id", "post_id")])
_RING = StructType([StructField("blob", BinaryType(), True)])  # a few hundred bytes
_ENTRY = StructType([StructField("view_id", StringType(), False),
                     StructField("ts", LongType(), False)])
_COORDINATES = ("kafka_topic", "kafka_partition", "kafka_offset", "kafka_timestamp",
                "kafka_key")


def view_key(topic: Column, view_id: Column) -> Column:
    """A view's view_id as the source read it; an engagement's partition behind a NUL, so
    that engagements pass through in a few groups. A view_id spelled the same only shares the
    group: the processor tells records apart by topic, and keeps state for views only."""
    return F.when(topic == TOPIC_VIEWS, view_id).otherwise(
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
    Spark refuses two applyInPandasWithState in one query. A bucket's state: its view_ids'
    first arrivals (MapState `firsts`), the expiry lists (`expiring_<i>`), the ring saying
    when each list is due (`ring`), the entries whose view_id has a later first arrival
    since (`replaced`), and one event-time timer at the earliest due."""

    def __init__(self, columns: StructType, ttl_ms: int,
                 join_max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        self.schema = dedup_schema(columns)
        self.columns = list(columns.fieldNames())
        self.ttl_ms = ttl_ms
        self.join_max_bytes = join_max_bytes  # the join's bound: a larger view is malformed
        self.buckets = 1  # set by `apply`

    def apply(self, df: DataFrame, buckets: int) -> DataFrame:
        """`df` (with VIEW_KEY) through the de-duplication, view_ids in `buckets` buckets
        (fixed by the query's checkpoint: jobs.state_buckets)."""
        self.buckets = buckets
        return with_bucket(df, VIEW_KEY, buckets).groupBy(
            BUCKET_COLUMN).transformWithStateInPandas(self, self.schema, "Append", "EventTime")

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.firsts = handle.getMapState("firsts", _VIEW_ID, _FIRST_ARRIVAL)
        self.ring_state = handle.getValueState("ring", _RING)
        self.lists = [handle.getListState(f"expiring_{i}", _ENTRY) for i in range(RING_SIZE)]
        self.replaced = handle.getListState("replaced", _ENTRY)

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame],
                        timerValues: TimerValues) -> Iterator[pd.DataFrame]:
        import pandas as pd

        watermark = timerValues.getCurrentWatermarkInMs()
        chunks = [f for f in rows if len(f)]
        frame = pd.concat(chunks, ignore_index=True) if len(chunks) > 1 else (
            chunks[0].reset_index(drop=True) if chunks else None)
        if int(key[0]) == UNKEYED:  # no view_id: the join dead-letters these views
            yield self._out(frame, {}, {})
            return
        ring, stored = self._ring()
        before = ring.next_due()
        self._expire(ring, watermark)
        parsed: dict[int, View] = {}
        duplicates = {} if frame is None else self.judge(ring, frame, watermark, parsed)
        self._keep(ring, stored, before, watermark)
        yield self._out(frame, duplicates, parsed)

    def handleExpiredTimer(self, key: Any, timerValues: TimerValues,
                           expiredTimerInfo: Any) -> Iterator[pd.DataFrame]:
        watermark = timerValues.getCurrentWatermarkInMs()
        ring, stored = self._ring()
        before = ring.next_due()
        self._expire(ring, watermark)
        self._keep(ring, stored, before, watermark)
        return iter(())

    def close(self) -> None:
        pass

    def _ring(self) -> tuple[ExpiryRing, bytes | None]:
        """The bucket's expiry index, and its bytes as stored (to write it only if changed)."""
        value = self.ring_state.get()
        stored = value[0] if value else None
        return ExpiryRing.from_bytes(stored, self.buckets, slot_ms(self.ttl_ms)), stored

    def _expire(self, ring: ExpiryRing, watermark_ms: int) -> None:
        """Forget the first arrivals of every list the watermark reached (as dedup_views
        would forget them), save those whose entry was replaced by a later first arrival of
        the same view_id (`replaced`), and empty the lists."""
        replaced: set[tuple[str, int]] | None = None
        kept = 0
        for index in ring.pop_due(watermark_ms):
            entries = list(self.lists[index].get())
            if entries and replaced is None:
                replaced = {(v, t) for v, t in self.replaced.get()}
                kept = len(replaced)
            for view_id, ts in entries:
                if replaced is not None and (view_id, ts) in replaced:
                    replaced.discard((view_id, ts))  # the map holds a later first arrival
                else:
                    self.firsts.removeKey((view_id,))
            self.lists[index].clear()
        if replaced is not None and len(replaced) != kept:
            if replaced:
                self.replaced.put(sorted(replaced))
            else:
                self.replaced.clear()

    def _keep(self, ring: ExpiryRing, stored: bytes | None, before: int | None,
              watermark_ms: int) -> None:
        """Store the ring if it changed, and move the bucket's one timer to its next due
        (a timer at or behind the watermark has fired already and is gone)."""
        data = None if ring.is_empty() else ring.to_bytes()
        if data != stored:
            if data is None:
                self.ring_state.clear()
            else:
                self.ring_state.update((data,))
        after = ring.next_due()
        if after != before:
            if before is not None and before > watermark_ms:
                self.handle.deleteTimer(before)
            if after is not None:
                self.handle.registerTimer(after)

    def judge(self, ring: ExpiryRing, frame: pd.DataFrame, watermark_ms: int,
              parsed: dict[int, View]) -> dict[int, DuplicateView]:
        """The duplicates among the frame's views (by row position); new first arrivals into
        the bucket's map and its expiry ring; the views parsed for the join into `parsed`.
        A view is parsed as the join parses it (within jobs.max_message_bytes): one that does
        not parse is no candidate, and the join dead-letters it; it never becomes a first
        arrival that a valid view of the same id would then duplicate."""
        candidates = (frame["kafka_topic"] == TOPIC_VIEWS) & frame[FUTURE_COLUMN].isna()
        if not candidates.any():
            return {}
        views = frame[candidates]
        columns = [column_values(views[name]) for name in (VIEW_KEY, "value", *_COORDINATES)]
        by_key: dict[str, list[View]] = {}
        position: dict[tuple[int, int], int] = {}
        for at, (view_id, value, *coordinates) in zip(
                views.index.tolist(), zip(*columns, strict=True), strict=True):
            record = parse_view(value, Source(*coordinates), self.join_max_bytes)
            if not isinstance(record, View):
                continue
            parsed[at] = record  # the join's parse would give the same
            # the source read view_id as the parser does (kafka/json_fields.py); a view keyed
            # under another id would be in another bucket: it is left to the join, undeduped
            if record.view_id == view_id:
                by_key.setdefault(view_id, []).append(record)
                position[(record.source.partition, record.source.offset)] = at
        duplicates: dict[int, DuplicateView] = {}
        expiring: dict[int, list[tuple[str, int]]] = {}
        replaced: list[tuple[str, int]] = []
        updates: list[tuple[tuple[str], tuple[int, int, int]]] = []
        keys = [(view_id,) for view_id in by_key]
        for (view_id,), value in zip(keys, get_values(self.firsts, keys), strict=True):
            old = None if value is None else FirstArrival(*value, self.ttl_ms)
            first, judged = dedup_views(old, by_key[view_id], watermark_ms, self.ttl_ms)
            for d in judged:
                if isinstance(d, DuplicateView):
                    duplicates[position[(d.source.partition, d.source.offset)]] = d
            if first is not None and first != old:  # a new first arrival: its own entry
                updates.append(((view_id,), (first.ts, first.user_id, first.post_id)))
                expiring.setdefault(ring.place(first.next_wakeup()), []).append(
                    (view_id, first.ts))
                if old is not None:  # its list entry must not remove the new one
                    replaced.append((view_id, old.ts))
        update_values(self.firsts, updates)  # each view_id's entry read and written once
        for index, entries in expiring.items():
            self.lists[index].appendList(entries)
        if replaced:
            self.replaced.appendList(replaced)
        return duplicates

    def _out(self, frame: pd.DataFrame | None, duplicates: dict[int, DuplicateView],
             parsed: dict[int, View]) -> pd.DataFrame:
        """The frame's own columns, the first arrival of each duplicate, the parsed views."""
        import pandas as pd

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
