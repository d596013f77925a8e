"""The template of a bucketed processor: a system's per-key logic over a bucket of keys.

`applyInPandasWithState` calls a BucketedProcessor once per bucket and micro-batch (and
once more when the bucket's timeout passes). The base
- dead-letters rows without a key (UNKEYED bucket: undecodable records) and rows from the
  future (CONTRACTS section 9) before any state is read;
- groups the other rows by key in arrival order and, per key, decodes its state from the
  bucket's store, runs `on_rows`, and stores it back with its next wake-up;
- runs `on_due` for every other key whose wake-up the watermark has reached (what a
  transformWithState timer per key did);
- keeps one event-time timeout per bucket, just before its earliest wake-up: Spark fires a
  timeout once the watermark passes it, a key's wake-up is due once the watermark reaches it.

A processor provides `load` (a key's state from bytes), `on_rows` and `on_due`; the state
object offers is_empty/to_bytes/next_wakeup (streaming/blob_state.KeyState). Output rows,
dead letters and drop counts come from OutputRows, exactly as the per-key processors.
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar

import pandas as pd
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout
from pyspark.sql.types import StructType, TimestampType

from spark_jobs.contracts.reasons import FUTURE
from spark_jobs.streaming.blob_state import KeyState
from spark_jobs.streaming.bucketed.frames import record_type, records, to_frame
from spark_jobs.streaming.bucketed.keys import BUCKET_COLUMN, UNKEYED, with_bucket
from spark_jobs.streaming.bucketed.store import STATE_SCHEMA, BucketStore
from spark_jobs.streaming.event_time import FUTURE_COLUMN, future_detail
from spark_jobs.streaming.output_rows import OutputRows

# Spark's worker pads every output with an all-null frame and concatenates: pandas warns on
# each batch about a future change that does not concern the result (typed by the schema)
warnings.filterwarnings("ignore", category=FutureWarning,
                        message="The behavior of DataFrame concatenation with empty or all-NA")

S = TypeVar("S", bound=KeyState)
WATERMARK_DELAY_KEY = "spark.watermarkDelayMs"  # Spark's EventTimeWatermark.delayKey
TIMEOUT_CLOCK = "_timeout_clock"


def with_timeout_clock(df: DataFrame) -> DataFrame:
    """`df` with a null column marked as its event time, so that applyInPandasWithState
    accepts an event-time timeout without filtering a single row.

    The query's watermark comes from `event_time.with_event_time`, whose column is dropped
    before the stateful step so that late rows reach the processor (they are dead letters,
    not silently lost). applyInPandasWithState refuses an event-time timeout unless a column
    of its input carries watermark metadata, and drops the rows whose marked column is
    behind the watermark; a null column carries the mark, and a null is never behind."""
    clock = F.lit(None).cast(TimestampType())
    return df.withColumn(TIMEOUT_CLOCK, clock).withMetadata(
        TIMEOUT_CLOCK, {WATERMARK_DELAY_KEY: 0})


class BucketedProcessor(OutputRows, Generic[S]):
    """Base of every bucketed processor. `key_field`: the input column of the per-key
    logic's key; `fields`: the input columns its records carry."""

    key_field: str
    checks_future = True  # False for a processor whose input has no event-time marker
    buckets = 1  # set by `apply`

    def __init__(self, schema: StructType, fields: Sequence[str]) -> None:
        super().__init__(schema)
        wanted = [*fields, *([FUTURE_COLUMN] if self.checks_future else [])]
        self.record = record_type(list(dict.fromkeys(wanted)))

    # -- what a processor provides ---------------------------------------------------------

    def load(self, payload: bytes | None) -> S:
        """A key's state from its stored bytes (None: a key without state)."""
        raise NotImplementedError

    def on_rows(self, key: Any, state: S, rows: list[Any], watermark_ms: int) -> Iterable[Row]:
        """The output of a key's records of this micro-batch, in arrival order."""
        raise NotImplementedError

    def on_due(self, key: Any, state: S, watermark_ms: int) -> Iterable[Row]:
        """The output when the key's wake-up has come and it had no records."""
        return ()

    def on_unkeyed(self, rows: list[Any]) -> Iterable[Row]:
        """Rows without a key (an undecodable record has no user): all dead letters."""
        return [self.undecodable(row) for row in rows]

    # -- Spark's entry point ---------------------------------------------------------------

    def apply(self, df: DataFrame, buckets: int) -> DataFrame:
        """`df` through this processor: keys (`key_field`) in `buckets` buckets, one Spark
        group each (`buckets` is fixed by the query's checkpoint: jobs.state_buckets)."""
        self.buckets = buckets
        keyed = with_bucket(df, self.key_field, buckets)
        return with_timeout_clock(keyed).groupBy(BUCKET_COLUMN).applyInPandasWithState(
            self, self.schema, STATE_SCHEMA, "append", GroupStateTimeout.EventTimeTimeout)

    def __call__(self, key: tuple[Any, ...], frames: Iterator[pd.DataFrame],
                 state: GroupState) -> Iterator[pd.DataFrame]:
        watermark = state.getCurrentWatermarkMs()
        rows = [] if state.hasTimedOut else records(frames, self.record)
        if int(key[0]) == UNKEYED:
            yield to_frame(list(self.on_unkeyed(rows)), self.schema)
            return
        blob = state.getOption
        store = BucketStore.from_blob(blob[0] if blob is not None else None, self.buckets)
        out = self.process(store, rows, watermark)
        self._keep(state, store, watermark)
        yield to_frame(out, self.schema)

    # -- what the base does ----------------------------------------------------------------

    def process(self, store: BucketStore, rows: list[Any], watermark_ms: int) -> list[Row]:
        """One bucket's micro-batch: its records by key, then the keys whose wake-up came."""
        out: list[Row] = []
        by_key: dict[Hashable, list[Any]] = {}
        key_index = self.record._fields.index(self.key_field)
        future_index = (self.record._fields.index(FUTURE_COLUMN)
                        if self.checks_future else None)
        for row in rows:
            if future_index is not None and row[future_index] is not None:
                out.append(self.dead(row, FUTURE, self.raw_text(row),
                                     detail=future_detail(row[future_index])))
                continue
            by_key.setdefault(row[key_index], []).append(row)
        for key, key_rows in by_key.items():
            state = self.load(store.get(key))
            out.extend(self.on_rows(key, state, key_rows, watermark_ms))
            self._put(store, key, state)
        for key in store.due(watermark_ms):
            if key in by_key:
                continue
            state = self.load(store.get(key))
            out.extend(self.on_due(key, state, watermark_ms))
            self._put(store, key, state)
        return out

    @staticmethod
    def _put(store: BucketStore, key: Hashable, state: KeyState) -> None:
        if state.is_empty():
            store.put(key, None, None)
        else:
            store.put(key, state.to_bytes(), state.next_wakeup())

    @staticmethod
    def _keep(state: GroupState, store: BucketStore, watermark_ms: int) -> None:
        """Store the bucket and time it out just before its earliest wake-up (Spark times a
        group out once the watermark is past the timestamp; a wake-up is due at it)."""
        if store.is_empty():
            state.remove()
            return
        state.update((store.to_blob(),))
        wakeup = store.next_wakeup()
        if wakeup is not None:
            state.setTimeoutTimestamp(max(wakeup - 1, watermark_ms, 1))
