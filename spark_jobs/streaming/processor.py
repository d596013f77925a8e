"""The one template of Tideline's transformWithState processors (every system's).

A processor reads its key's rows at the current watermark, emits output rows of one schema
tagged by `kind`, turns what it cannot use into dead-letter rows (`kind` "dead", the
DEAD_LETTER_COLUMNS filled, reason `late` for a record behind the watermark), and keeps one
event-time timer per key: the next moment its state has work to do. The base does all that;
a processor keeps only its system's logic, in `on_rows` and `on_timer`.

The base also enforces CONTRACTS section 9 for every processor: a record whose event time is
too far ahead of its Kafka timestamp (marked by `event_time.with_event_time`) never reaches
`on_rows`; it becomes a `future` dead letter. `guarded` turns an exception raised by one
record into an `error` dead letter, and `dropped` counts what a processor filters out.

The rows themselves (dead letters, drop counts, `guarded`) come from `OutputRows`
(streaming/output_rows.py), shared with the bucketed processors.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import chain
from typing import Any

from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import (
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from spark_jobs.contracts.reasons import FUTURE
from spark_jobs.streaming.event_time import FUTURE_COLUMN, future_detail
from spark_jobs.streaming.output_rows import OutputRows, output_schema

__all__ = ["KeyedProcessor", "keep_one_timer", "output_schema"]


def keep_one_timer(
    handle: StatefulProcessorHandle, registered: Iterable[int], wanted: int | None,
    watermark_ms: int,
) -> None:
    """Leave exactly `wanted` (or no timer) registered for the current key. A registered timer
    at or behind the watermark has fired already and is gone; deleting it would fail."""
    registered = list(registered)
    for timer in registered:
        if timer != wanted and timer > watermark_ms:
            handle.deleteTimer(timer)
    if wanted is not None and wanted not in registered:
        handle.registerTimer(wanted)


class KeyedProcessor(OutputRows, StatefulProcessor):
    """Base of every processor: the watermark, rows of one schema, dead letters, one timer.

    `kept_on_dead`: input fields a dead-letter row of a source row carries besides the
    DEAD_LETTER_COLUMNS (the same names in the output schema)."""

    checks_future = True  # False for a processor whose input has no event-time marker

    # -- what a processor provides ---------------------------------------------------------

    def open(self, handle: StatefulProcessorHandle) -> None:
        """Declare the key's state (also called on the driver, to learn the state schema)."""

    def on_rows(self, key: Any, rows: Iterator[Row], watermark_ms: int) -> Iterator[Row]:
        """The output of a key's rows of this micro-batch (the key has a value)."""
        raise NotImplementedError

    def on_timer(self, key: Any, watermark_ms: int) -> Iterator[Row]:
        """The output when the key's timer fires."""
        return iter(())

    # -- Spark's entry points --------------------------------------------------------------

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.open(handle)

    def handleInputRows(
        self, key: Any, rows: Iterator[Row], timerValues: TimerValues
    ) -> Iterator[Row]:
        watermark = timerValues.getCurrentWatermarkInMs()
        if key[0] is None:
            return self.unkeyed(rows)
        future: list[Row] = []
        timely = self._set_aside_future(rows, future)
        return chain(self.on_rows(key, timely, watermark), future)

    def _set_aside_future(self, rows: Iterator[Any], future: list[Row]) -> Iterator[Any]:
        """The rows that are not from the future; the others become dead letters in `future`
        (consumed lazily, so `future` is complete once on_rows has read every row)."""
        for row in rows:
            ahead = getattr(row, FUTURE_COLUMN, None) if self.checks_future else None
            if ahead is None:
                yield row
            else:
                future.append(self.dead(row, FUTURE, self.raw_text(row),
                                        detail=future_detail(ahead)))

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: Any
    ) -> Iterator[Row]:
        return self.on_timer(key, timerValues.getCurrentWatermarkInMs())

    def close(self) -> None:
        pass

    # -- what the base does ----------------------------------------------------------------

    def unkeyed(self, rows: Iterable[Any]) -> Iterator[Row]:
        """Rows without a key value (an undecodable record has no user): all dead letters,
        and no state is touched."""
        return (self.undecodable(row) for row in rows)

    def keep_timer(self, registered: Iterable[int], wanted: int | None, watermark_ms: int
                   ) -> None:
        """Move the key's timer to `wanted` (see keep_one_timer)."""
        keep_one_timer(self.handle, registered, wanted, watermark_ms)
