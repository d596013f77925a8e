"""A batch of samples encoded column by column: the bytes fastavro writes, and clear errors."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_jobs.contracts.tables import training_samples
from spark_jobs.samples.encoding.columnar_avro import (
    ColumnError,
    UnsupportedSchema,
    encode_columns,
    varints,
)
from spark_jobs.samples.encoding.sample_avro import (
    DEFAULT_SIGNALS,
    SampleEncoder,
    SampleEncodingError,
    decode_sample,
)

SCHEMA = training_samples(DEFAULT_SIGNALS).arrow_schema()
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
TEXT = st.text(max_size=40)  # any code point but lone surrogates (not UTF-8)


@st.composite
def samples(draw) -> list[dict]:
    rows = draw(st.integers(0, 30))
    return [{"sample_id": draw(TEXT), "view_id": draw(TEXT), "user_id": draw(INT64),
             "post_id": draw(INT64), "ts": draw(INT64), "context": draw(TEXT),
             "labels": {s: draw(st.integers(0, 1)) for s in DEFAULT_SIGNALS}}
            for _ in range(rows)]


def one_by_one(encoder: SampleEncoder, table: pa.Table) -> list[bytes]:
    return [encoder.encode(sample) for sample in table.to_pylist()]


@settings(max_examples=150, deadline=None)
@given(samples(), st.sampled_from([None, 0, 600_000, -1, (1 << 63) - 1]),
       st.sampled_from([1, 2]))
def test_every_batch_is_encoded_as_fastavro_encodes_each_sample(rows, window, version):
    """Strings of any code point (multi-byte UTF-8, empty), longs of any size and sign,
    the optional window_ms null or set, either schema version."""
    defaults = {"window_ms": window} if version == 2 else None
    encoder = SampleEncoder(version=version, defaults=defaults)
    table = pa.Table.from_pylist(rows, SCHEMA)
    assert encoder.encode_table(table) == one_by_one(encoder, table)


def test_slices_and_chunks_of_a_table_are_encoded_as_their_rows():
    rows = [{"sample_id": f"s{i}", "view_id": f"v{i}", "user_id": i, "post_id": -i,
             "ts": 1_767_225_600_000 + i, "context": "é" * (i % 5),
             "labels": {s: (i >> k) & 1 for k, s in enumerate(DEFAULT_SIGNALS)}}
            for i in range(40)]
    encoder = SampleEncoder(defaults={"window_ms": 600_000})
    table = pa.Table.from_pylist(rows, SCHEMA)
    chunked = pa.concat_tables([table.slice(0, 13), table.slice(13)])
    sorted_ = table.sort_by([("post_id", "ascending")])  # taken rows: new buffers
    for part in (table.slice(7, 20), chunked, sorted_, table.slice(40)):
        encoded = encoder.encode_table(part)
        assert encoded == one_by_one(encoder, part)
        assert [decode_sample(message)["sample_id"] for message in encoded] == \
            part["sample_id"].to_pylist()


def test_varints_are_avros_zigzag_groups():
    counts, data = varints(np.array([0, -1, 1, 63, -64, 64, 1 << 62, -(1 << 63)]))
    assert counts.tolist() == [1, 1, 1, 1, 1, 2, 10, 10]
    assert data[:7].tolist() == [0, 1, 2, 126, 127, 0x80, 0x01]
    assert data[-10:].tolist() == [0xFF] * 9 + [0x01]


def test_a_null_where_the_schema_has_none_is_an_encoding_error():
    table = pa.table({"sample_id": ["s"]})
    with pytest.raises(SampleEncodingError, match="sample_id is null in 1 sample"):
        SampleEncoder().encode_table(
            pa.Table.from_pylist([{"sample_id": None, "view_id": "v", "user_id": 1,
                                   "post_id": 1, "ts": 1, "context": "{}",
                                   "labels": dict.fromkeys(DEFAULT_SIGNALS, 0)}],
                                 SCHEMA.set(0, pa.field("sample_id", pa.string()))))
    with pytest.raises(SampleEncodingError, match="view_id is missing"):
        SampleEncoder().encode_table(table)


@pytest.mark.parametrize(("change", "message"), [
    ({"labels": {s: 0 for s in DEFAULT_SIGNALS[:-1]}}, "labels.skip is missing"),
    ({"labels": {**dict.fromkeys(DEFAULT_SIGNALS, 0), "like": 1 << 40}}, "outside Avro's int"),
    ({"labels": {**dict.fromkeys(DEFAULT_SIGNALS, 0), "other": 0}}, "fields the schema does not"),
    ({"colour": "red"}, "columns the schema does not have"),
    ({"user_id": "42"}, "user_id is string, not an integer"),
])
def test_a_column_that_does_not_fit_says_which_field(change, message):
    row = {"sample_id": "s", "view_id": "v", "user_id": 1, "post_id": 1, "ts": 1,
           "context": "{}", "labels": dict.fromkeys(DEFAULT_SIGNALS, 0), **change}
    with pytest.raises(SampleEncodingError, match=message):
        SampleEncoder().encode_table(pa.Table.from_pylist([row]))


def test_a_type_it_does_not_write_is_left_to_the_per_sample_encoder():
    schema = {"type": "record", "name": "R", "fields": [{"name": "x", "type": "double"}]}
    with pytest.raises(UnsupportedSchema, match="double"):
        encode_columns(pa.table({"x": [1.5]}), schema, b"")
    with pytest.raises(ColumnError, match="x is missing"):
        encode_columns(pa.table({"y": [1]}), {**schema, "fields": [
            {"name": "x", "type": "long"}, {"name": "y", "type": "long"}]}, b"")
