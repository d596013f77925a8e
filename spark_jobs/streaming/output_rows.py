"""The output rows every Tideline processor emits, whatever Spark API drives it.

A processor's output has one schema (`output_schema`): `kind`, its own fields, the
dead-letter columns and the `dropped` count. `OutputRows` builds those rows for one schema:
a plain row, a dead letter of a Kafka record (reason, detail, the record's coordinates; the
sink reads the received bytes back by offset), an undecodable record, a late one, the count
of records filtered out by design, and `guarded`, which turns an exception raised by one
record into an `error` dead letter (CONTRACTS section 9: no record stops a job).

Both the per-key transformWithState processors (streaming/processor.py) and the bucketed
ones (streaming/bucketed/) use it, so a dead letter reads the same from either.

Rows are filled from a blank row of the schema: Spark converts output rows by field name, and
a row that names every field (in schema order) converts whatever the converter does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from pyspark.sql import Row
from pyspark.sql.types import LongType, StringType, StructField, StructType

from spark_jobs.contracts.reasons import ERROR, MALFORMED
from spark_jobs.contracts.tables import DEAD_LETTERS
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


class OutputRows:
    """Builds the output rows of one schema. `kept_on_dead`: input fields a dead-letter row
    of a source row carries besides the DEAD_LETTER_COLUMNS (same names in the schema)."""

    kept_on_dead: tuple[str, ...] = ()

    def __init__(self, schema: StructType) -> None:
        self.schema = schema
        self._blank = dict.fromkeys(schema.fieldNames())

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


class PositionalRow:
    """Builds output rows of one schema from values given in a fixed order of `fields` (the
    others null), as plain tuples in schema order: for a processor's per-record rows, where
    a keyword Row would cost several times the row's own work."""

    __slots__ = ("slots", "width")

    def __init__(self, schema: StructType, fields: Sequence[str]) -> None:
        names = schema.fieldNames()
        self.slots = [names.index(name) for name in fields]  # ValueError: not in the schema
        self.width = len(names)

    def __call__(self, *values: Any) -> tuple[Any, ...]:
        row: list[Any] = [None] * self.width
        for at, value in zip(self.slots, values, strict=True):
            row[at] = value
        return tuple(row)
