"""The one template of Tideline's transformWithState processors (every system's).

A processor reads its key's rows at the current watermark, emits output rows of one schema
tagged by `kind`, turns what it cannot use into dead-letter rows (`kind` "dead", the
DEAD_LETTER_COLUMNS filled, reason `late` for a record behind the watermark), and keeps one
event-time timer per key: the next moment its state has work to do. The base does all that;
a processor keeps only its system's logic, in `on_rows` and `on_timer`.

Rows are filled from a blank row of the schema: Spark converts output rows by field name, and
a row that names every field (in schema order) converts whatever the converter does.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import (
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)
from pyspark.sql.types import StringType, StructField, StructType

from spark_jobs.contracts.tables import DEAD_LETTERS
from spark_jobs.streaming.lake.dead_letters import (
    DEAD_LETTER_COLUMNS,
    KIND_DEAD,
    LATE,
    DeadLetter,
    KafkaOrigin,
)


def output_schema(*fields: StructField, trailing: Sequence[StructField] = ()) -> StructType:
    """A processor's output rows: `kind`, its own `fields`, the dead-letter columns (typed as
    in the `dead_letters` table, nullable), then `trailing`."""
    letters = DEAD_LETTERS.select(*DEAD_LETTER_COLUMNS).spark_schema()
    return StructType([StructField("kind", StringType(), False), *fields, *letters.fields,
                       *trailing])


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
        return self.on_rows(key, rows, watermark)

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

    def dead(self, row: Any, reason: str, raw_value: str | None) -> Row:
        """A dead letter for a row of the Kafka source (its `kafka_*` coordinates)."""
        kept = {name: getattr(row, name) for name in self.kept_on_dead}
        return self.dead_letter(DeadLetter(reason, raw_value, KafkaOrigin.of(row)), **kept)

    def undecodable(self, row: Any) -> Row:
        """The dead letter of a row the source could not decode: its error, its raw text."""
        return self.dead(row, row.error, row.raw_value)

    def late(self, row: Any, decoded: str) -> Row:
        """The dead letter of a row behind the watermark, with the record as it was decoded."""
        return self.dead(row, LATE, decoded)

    def keep_timer(self, registered: Iterable[int], wanted: int | None, watermark_ms: int
                   ) -> None:
        """Move the key's timer to `wanted` (see keep_one_timer)."""
        keep_one_timer(self.handle, registered, wanted, watermark_ms)
