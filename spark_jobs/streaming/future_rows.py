"""Rows from the future (CONTRACTS section 9: clock skew): the column that marks them and the
dead-letter detail that explains them. Plain Python, so that processes that only evaluate
rows (the fraud engine processes) need not import Spark; event_time.py sets the column."""

from __future__ import annotations

from spark_jobs.config.durations import format_duration_ms

FUTURE_COLUMN = "future_by_ms"  # how far a record's event time is ahead of its Kafka time


def future_detail(ahead_ms: int) -> str:
    """The dead-letter detail of a record from the future."""
    return (f"event time is {format_duration_ms(ahead_ms)} ahead of its Kafka timestamp "
            f"(more than jobs.max_clock_skew)")
