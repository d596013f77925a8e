"""The columns of the `tideline_kafka` source, as Spark declares them and as Arrow carries them.

Raw reads give the Kafka key and value bytes; with `record=<spec>` the spec's fields come first
(all nullable, since a message that does not decode becomes an error row), then the Kafka
columns and `error` / `raw_value`. Spark checks the first Arrow batch against the declared
schema, so both are derived here from the same field list.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from spark_jobs.contracts.records import BOOL, LONG, SPECS, STRING, TIME_MS

if TYPE_CHECKING:  # pyarrow loads where Arrow batches are made: Spark's planner processes
    import pyarrow as pa  # load this module for the declared schema only

_SPARK_TYPES: dict[str, DataType] = {
    LONG: LongType(), TIME_MS: LongType(), STRING: StringType(), BOOL: BooleanType()
}

RAW_SCHEMA = StructType(
    [
        StructField("kafka_key", StringType()),
        StructField("value", BinaryType()),
        StructField("kafka_topic", StringType()),
        StructField("kafka_partition", IntegerType()),
        StructField("kafka_offset", LongType()),
        StructField("kafka_timestamp", LongType()),
    ]
)
RECORD_META_FIELDS = (
    StructField("kafka_key", StringType()),
    StructField("kafka_topic", StringType()),
    StructField("kafka_partition", IntegerType()),
    StructField("kafka_offset", LongType()),
    StructField("kafka_timestamp", LongType()),
    StructField("error", StringType()),
    StructField("raw_value", StringType()),
)
META_NAMES = frozenset(field.name for field in RECORD_META_FIELDS)


def record_fields(record: str | None) -> tuple[tuple[str, str], ...]:
    """The decoded columns: the fields of every named spec, in order of first appearance."""
    fields: dict[str, str] = {}
    for name in (record or "").split(","):
        if name.strip():
            for field, kind in SPECS[name.strip()].fields:
                fields.setdefault(field, kind)
    return tuple(fields.items())


def source_schema(record: str | None, json_longs: tuple[str, ...] = (),
                  json_strings: tuple[str, ...] = ()) -> StructType:
    """Raw columns (then a nullable long per `jsonLongs` field and a nullable string per
    `jsonStrings` field), or the specs' fields (all nullable) followed by Kafka and error
    columns."""
    if not record:
        return StructType([*RAW_SCHEMA.fields,
                           *(StructField(name, LongType()) for name in json_longs),
                           *(StructField(name, StringType()) for name in json_strings)])
    fields = [StructField(name, _SPARK_TYPES[kind]) for name, kind in record_fields(record)]
    return StructType([*fields, *RECORD_META_FIELDS])


def arrow_schema(record: str | None, json_longs: tuple[str, ...] = (),
                 json_strings: tuple[str, ...] = ()) -> pa.Schema:
    """The Arrow schema Spark expects for `source_schema(record, json_longs, json_strings)`
    (checked on the first batch)."""
    import pyarrow as pa

    arrow_types = {LONG: pa.int64(), TIME_MS: pa.int64(), STRING: pa.string(), BOOL: pa.bool_()}
    if not record:
        fields = [
            pa.field("kafka_key", pa.string()),
            pa.field("value", pa.binary()),
        ]
    else:
        fields = [pa.field(name, arrow_types[kind]) for name, kind in record_fields(record)]
        fields.append(pa.field("kafka_key", pa.string()))
    fields += [
        pa.field("kafka_topic", pa.string()),
        pa.field("kafka_partition", pa.int32()),
        pa.field("kafka_offset", pa.int64()),
        pa.field("kafka_timestamp", pa.int64()),
    ]
    if record:
        fields += [pa.field("error", pa.string()), pa.field("raw_value", pa.string())]
    fields += [pa.field(name, pa.int64()) for name in json_longs]
    fields += [pa.field(name, pa.string()) for name in json_strings]
    return pa.schema(fields)
