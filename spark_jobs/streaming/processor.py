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

Rows are filled from a blank row of the schema: Spark converts output rows by field name, and
a row that names every field (in schema order) converts whatever the converter does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain
from typing import Any

from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import (
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)
from pyspark.sql.types import LongType, StringType, StructField, StructType

from spark_jobs.contracts.reasons import ERROR, FUTURE, MALFORMED
from spark_jobs.contracts.tables import DEAD_LETTERS
from spark_jobs.streaming.event_time import FUTURE_COLUMN, future_detail
from spark_jobs.streaming.lake.dead_letters import (
    DEAD_LETTER_COLUMNS,
    DROPPED_COLUMN,
    KIND_DEAD,
    KIND_DROPPED,
    LATE,
    DeadLetter,
    KafkaOrigin,
)


def output_schema(*fields: StructField, trailing: Sequence[StructField] = ()) -> StructType:
    """A processor's output rows: `kind`, its own `fields`, the dead-letter columns (typed as
    in the `dead_letters` table, nullable), the `dropped` count, then `trailing`."""
    letters = DEAD_LETTERS.select(*DEAD_LETTER_COLUMNS).spark_schema()
    return StructType([StructField("kind", StringType(), False), *fields, *letters.fields,
                       StructField(DROPPED_COLUMN, LongType()), *trailing])


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


class KeyedProcessor(StatefulProcessor):
    """Base of every processor: the watermark, rows of one schema, dead letters, one timer.

    `kept_on_dead`: input fields a dead-letter row of a source row carries besides the
    DEAD_LETTER_COLUMNS (the same names in the output schema)."""

    kept_on_dead: tuple[str, ...] = ()
    checks_future = True  # False for a processor whose input has no event-time marker

    def __init__(self, schema: StructType) -> None:
        self.schema = schema
        self._blank = dict.fromkeys(schema.fieldNames())

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

    def row(self, kind: str, **fields: Any) -> Row:
        """An output row of the schema: `kind` and `fields`, every other field null."""
        return Row(**{**self._blank, "kind": kind, **fields})

    def dead_letter(self, letter: DeadLetter, **fields: Any) -> Row:
        """The output row of a dead letter (`fields`: other columns the processor keeps)."""
        return self.row(KIND_DEAD, **fields, **letter.columns())

    def dead(self, row: Any, reason: str, raw_value: str | None, detail: str | None = None
             ) -> Row:
        """A dead letter for a row of the Kafka source (its `kafka_*` coordinates)."""
        kept = {name: getattr(row, name) for name in self.kept_on_dead}
        letter = DeadLetter(reason, raw_value, KafkaOrigin.of(row), detail)
        return self.dead_letter(letter, **kept)

    def raw_text(self, row: Any) -> str | None:
        """The record's text for a dead letter when the sink cannot read it back: its raw
        value when the row has one (the sink reads the received bytes back by offset)."""
        value = getattr(row, "raw_value", None) or getattr(row, "value", None)
        if isinstance(value, bytes | bytearray):
            return bytes(value).decode("utf-8", "replace")
        return value

    def undecodable(self, row: Any) -> Row:
        """The dead letter of a row the source could not decode: malformed, with the
        decoder's detail and the raw text."""
        return self.dead(row, MALFORMED, row.raw_value, detail=row.error)

    def guarded(self, row: Any, step: Callable[[], Iterable[Row]]) -> Iterator[Row]:
        """The rows of `step` (one record's processing), or, when it raises, the record as
        an `error` dead letter: no record can stop the job (CONTRACTS section 9). A step
        must leave state consistent when it raises (update state after the checks)."""
        try:
            out = list(step())
        except Exception as exc:  # one bad record must not crash-loop the query
            return iter((self.dead(row, ERROR, self.raw_text(row),
                                   detail=f"{type(exc).__name__}: {exc}"),))
        return iter(out)

    def dropped(self, reason: str, count: int) -> Row:
        """A count of records of this key filtered out by design (non-critical type, capped,
        duplicate, ...): the sink adds it to the job's drop counts."""
        return self.row(KIND_DROPPED, reason=reason, **{DROPPED_COLUMN: count})

    def late(self, row: Any, decoded: str) -> Row:
        """The dead letter of a row behind the watermark, with the record as it was decoded."""
        return self.dead(row, LATE, decoded)

    def keep_timer(self, registered: Iterable[int], wanted: int | None, watermark_ms: int
                   ) -> None:
        """Move the key's timer to `wanted` (see keep_one_timer)."""
        keep_one_timer(self.handle, registered, wanted, watermark_ms)
