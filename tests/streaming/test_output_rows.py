"""PositionalRow: the same row as OutputRows.row, as a plain tuple in schema order."""

from __future__ import annotations

import pytest
from pyspark.sql.types import LongType, StringType, StructField

from spark_jobs.streaming.output_rows import OutputRows, PositionalRow, output_schema

SCHEMA = output_schema(StructField("user_id", LongType()), StructField("note", StringType()))


def test_a_positional_row_equals_the_keyword_row_of_the_same_fields() -> None:
    make = PositionalRow(SCHEMA, ("kind", "note", "user_id", "offset"))
    row = make("sample", "n", 42, 7)
    assert type(row) is tuple
    assert row == tuple(OutputRows(SCHEMA).row("sample", note="n", user_id=42, offset=7))


def test_a_field_outside_the_schema_or_a_missing_value_is_refused() -> None:
    with pytest.raises(ValueError):
        PositionalRow(SCHEMA, ("kind", "no_such_field"))
    with pytest.raises(ValueError):
        PositionalRow(SCHEMA, ("kind", "note"))("sample")
