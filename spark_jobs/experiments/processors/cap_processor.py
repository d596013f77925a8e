"""Spark adapter of per-user hourly capping (filter_events): users in buckets, rows in offset order.

Keyed by the bucket of user_id (streaming/bucketed): each user's HourlyCap is kept as bytes
in its bucket's blob, and one timeout per bucket stands for every user's oldest hour end.

Output rows carry `kind`: "ok" for accepted events, "dead" for rejected or late records, and
"dropped" with the count of capped events (CONTRACTS section 9: nothing dropped uncounted).

A bucket's batch is capped column-wise (core/cap_batch.py, the same decisions as HourlyCap
row by row) and its accepted rows go out as one frame, without a Python object per row.
The rare users with a record the vectorized path cannot take (undecodable, no event time,
no offset) go row by row through `cap_rows`: each record through `per_record.each_record`,
so one that raises becomes an `error` dead letter and takes no room in its hour.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import orjson
import pandas as pd
from pyspark.sql import Row
from pyspark.sql.streaming.state import GroupState
from pyspark.sql.types import LongType, StringType, StructField

from spark_jobs.contracts.reasons import CAPPED, LATE
from spark_jobs.experiments.core.cap_batch import ADMITTED
from spark_jobs.experiments.core.cap_batch import CAPPED as CAPPED_OUTCOME
from spark_jobs.experiments.core.cap_batch import LATE as LATE_OUTCOME
from spark_jobs.experiments.core.capping import HourlyCap
from spark_jobs.experiments.core.tumbling_windows import is_late, late_detail
from spark_jobs.experiments.processors.cap_frames import AcceptedFrames, bucket_frame, cap_frame
from spark_jobs.experiments.processors.per_record import each_record
from spark_jobs.streaming.bucketed.frames import records, to_frame
from spark_jobs.streaming.bucketed.keys import UNKEYED
from spark_jobs.streaming.bucketed.processor import BucketedProcessor
from spark_jobs.streaming.bucketed.store import BucketStore
from spark_jobs.streaming.event_time import FUTURE_COLUMN
from spark_jobs.streaming.output_rows import output_schema

CAPPED_EVENT_SCHEMA = output_schema(
    StructField("user_id", LongType(), True),
    StructField("event_type", StringType(), True),
    StructField("ts", LongType(), True),
)

# what the processor reads of an input row (filter_events.build selects them)
INPUT_FIELDS = ("user_id", "event_type", "ts", "kafka_topic", "kafka_partition",
                "kafka_offset", "kafka_timestamp", "kafka_key", "error", "raw_value")


def event_json(row: Any) -> str:
    """The stripped event as JSON text (what a late record looked like once decoded)."""
    return orjson.dumps(
        {"user_id": row.user_id, "event_type": row.event_type, "ts": row.ts}
    ).decode()


def _in_offset_order(rows: Iterable[Any]) -> list[Any]:
    return sorted(rows, key=lambda r: (r.kafka_partition, r.kafka_offset))


class HourlyCapProcessor(BucketedProcessor[HourlyCap]):
    """First `cap` critical events per user and clock hour pass; late ones go to dead letters."""

    key_field = "user_id"
    kept_on_dead = ("user_id", "event_type", "ts")

    def __init__(self, cap: int) -> None:
        super().__init__(CAPPED_EVENT_SCHEMA, INPUT_FIELDS)
        self.cap = cap
        self.accepted = AcceptedFrames(self.schema)

    def load(self, payload: bytes | None) -> HourlyCap:
        return HourlyCap.from_bytes(self.cap, payload)

    # -- row by row: the rare users the vectorized path leaves ------------------------------

    def on_unkeyed(self, rows: list[Any]) -> Iterable[Row]:
        return super().on_unkeyed(_in_offset_order(rows))

    def on_rows(self, key: Any, state: HourlyCap, rows: list[Any], watermark_ms: int
                ) -> Iterator[Row]:
        state.expire(watermark_ms)
        return self.cap_rows(state, rows, watermark_ms)

    def on_due(self, key: Any, state: HourlyCap, watermark_ms: int) -> Iterable[Row]:
        state.expire(watermark_ms)
        return ()

    def cap_rows(self, counters: HourlyCap, rows: Iterable[Any], watermark_ms: int
                 ) -> Iterator[Row]:
        """The output of one key's rows in offset order, counting into `counters`."""
        return each_record(self, _in_offset_order(rows),
                           lambda row: self.one_event(counters, row, watermark_ms))

    def one_event(self, counters: HourlyCap, row: Any, watermark_ms: int) -> tuple[Row, ...]:
        """One record's output: accepted, capped (a count), late or undecodable."""
        if row.error is not None:
            return (self.undecodable(row),)
        if is_late(row.ts, watermark_ms):
            return (self.dead(row, LATE, event_json(row), late_detail(row.ts, watermark_ms)),)
        accepted = self.row(
            "ok", user_id=row.user_id, event_type=row.event_type, ts=row.ts,
            topic=row.kafka_topic, partition=row.kafka_partition,
            offset=row.kafka_offset, kafka_timestamp=row.kafka_timestamp,
            key=row.kafka_key,
        )
        return (accepted,) if counters.admit(row.ts) else (self.dropped(CAPPED, 1),)

    # -- a bucket at a time -----------------------------------------------------------------

    def __call__(self, key: tuple[Any, ...], frames: Iterator[pd.DataFrame],
                 state: GroupState) -> Iterator[pd.DataFrame]:
        if state.hasTimedOut or int(key[0]) == UNKEYED:
            return super().__call__(key, frames, state)
        return self._bucket(bucket_frame(frames, self.record._fields), state)

    def _bucket(self, frame: pd.DataFrame, state: GroupState) -> Iterator[pd.DataFrame]:
        """One bucket's batch: plain users capped column-wise, the others (and rows from the
        future) through the base, row by row; then the bucket's state and timeout."""
        watermark = state.getCurrentWatermarkMs()
        blob = state.getOption
        store = BucketStore.from_blob(blob[0] if blob is not None else None, self.buckets)
        plain = _plain_rows(frame)
        every = bool(plain.all())
        accepted, out = self.cap_plain(store, frame if every else frame[plain], watermark)
        rest = [] if every else records([frame[~plain]], self.record)
        out.extend(self.process(store, rest, watermark))
        self._keep(state, store, watermark)
        yield accepted
        if out:
            yield to_frame(out, self.schema)

    def cap_plain(self, store: BucketStore, frame: pd.DataFrame, watermark_ms: int
                  ) -> tuple[pd.DataFrame, list[Row]]:
        """Plain users' rows capped at once: the accepted rows as a frame, the late ones as
        dead letters and the capped ones as one count; their counters back in `store`."""
        users = frame["user_id"].to_numpy(dtype=np.int64)
        counters = {user: self.load(store.get(user)) for user in np.unique(users).tolist()}
        outcome = cap_frame(counters, frame, watermark_ms)
        for user, counter in counters.items():
            self._put(store, user, counter)
        out: list[Row] = []
        late = outcome == LATE_OUTCOME
        if late.any():  # through the per-record path: the same dead letters, no room taken
            out.extend(self.cap_rows(HourlyCap(self.cap), records([frame[late]], self.record),
                                     watermark_ms))
        capped = int(np.count_nonzero(outcome == CAPPED_OUTCOME))
        if capped:
            out.append(self.dropped(CAPPED, capped))
        return self.accepted(frame, np.flatnonzero(outcome == ADMITTED)), out


def _plain_rows(frame: pd.DataFrame) -> np.ndarray:
    """The rows of users whose every record the vectorized path takes: decoded, with an
    event time and an offset, not from the future (a future row goes to the base alone)."""
    odd = (frame["error"].notna() | frame["ts"].isna() | frame["kafka_partition"].isna()
           | frame["kafka_offset"].isna()).to_numpy(dtype=bool)
    future = frame[FUTURE_COLUMN].notna().to_numpy(dtype=bool)
    if odd.any():
        odd_users = frame["user_id"][odd].unique()
        odd = frame["user_id"].isin(odd_users).to_numpy(dtype=bool)
    return ~(odd | future)
