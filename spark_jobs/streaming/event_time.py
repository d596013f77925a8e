"""Event time in Tideline's streaming jobs: watermarks that route late records instead of dropping.

Spark's stateful operators silently drop rows behind the watermark, but the contract wants
them in `dead_letters`. So the watermark is declared on a helper timestamp column that is
dropped again before the stateful step: Spark still tracks the query's watermark (min over
inputs) and fires event-time timers, while transformWithState receives every row and decides
lateness itself from `timerValues.getCurrentWatermarkInMs()`.

The driver-side sink needs the same watermark: `checkpoint.batch_watermark_ms` reads it.

Clock skew (CONTRACTS section 9): a record whose event time is more than `jobs.max_clock_skew`
ahead of its Kafka timestamp must never move the watermark (one device dated 2036 would make
every later record late). Such a row gets no watermark time and carries how far ahead it is in
FUTURE_COLUMN; the processors' base turns it into a `future` dead letter.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_jobs.config.durations import format_duration_ms
from spark_jobs.contracts.records import MAX_TIME_MS
from spark_jobs.streaming.future_rows import FUTURE_COLUMN, future_detail

__all__ = ["FUTURE_COLUMN", "future_by_ms", "future_detail", "with_event_time"]

_WATERMARK_COLUMN = "_event_time"
_TIME_COLUMN = "_event_time_ms"  # the event time as given, before any check


def future_by_ms(ts: Column, kafka_timestamp: Column, max_clock_skew_ms: int) -> Column:
    """How far `ts` is ahead of the Kafka timestamp when more than the allowed skew, else
    null (also when either time is unknown)."""
    ahead = ts - kafka_timestamp
    return F.when(ahead > F.lit(max_clock_skew_ms), ahead)


def with_event_time(df: DataFrame, ts_ms: str | Column, lateness_ms: int, *,
                    max_clock_skew_ms: int) -> DataFrame:
    """Track a watermark of `lateness` behind the max event time without filtering any row;
    rows too far ahead of their Kafka timestamp get FUTURE_COLUMN and move no watermark."""
    # a time Spark cannot represent (e.g. 1e18 ms) would fail the query (ANSI overflow);
    # such a record is invalid anyway and the job dead-letters it, so it just sets no watermark.
    # The time is a column of its own first: the expressions below use it seven times, and
    # Spark inlines an expression into each use inside CASE WHEN branches (an event time read
    # from the JSON text was parsed 15 times per row, BENCHMARKS.md 2026-11-29); it does not
    # inline a costly column referenced more than once.
    if _TIME_COLUMN in df.columns or _WATERMARK_COLUMN in df.columns:
        raise ValueError(f"with_event_time needs the column names {_TIME_COLUMN!r} and "
                         f"{_WATERMARK_COLUMN!r} for itself; the input has one of them")
    timed = df.withColumn(_TIME_COLUMN, ts_ms if isinstance(ts_ms, Column) else F.col(ts_ms))
    raw_ts = F.col(_TIME_COLUMN)
    ts = F.when(raw_ts.between(0, MAX_TIME_MS), raw_ts)
    ahead = future_by_ms(ts, F.col("kafka_timestamp"), max_clock_skew_ms)
    delay = format_duration_ms(lateness_ms)
    delay_text = "0 seconds" if delay == "0" else _interval_text(lateness_ms)
    return (
        timed.withColumn(FUTURE_COLUMN, ahead)
        .withColumn(_WATERMARK_COLUMN, F.timestamp_millis(F.when(ahead.isNull(), ts)))
        .drop(_TIME_COLUMN)
        .withWatermark(_WATERMARK_COLUMN, delay_text)
        .drop(_WATERMARK_COLUMN)
    )


def _interval_text(ms: int) -> str:
    return f"{ms} milliseconds"
