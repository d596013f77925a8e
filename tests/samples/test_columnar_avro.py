"""A batch of samples encoded column by column: the bytes fastavro writes, and clear errors."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_jobs.contracts.tables import training_samples
from spark_jobs.samples.encoding import sample_avro
from spark_jobs.samples.encoding.columnar_avro import (
    ColumnError,
    UnsupportedSchema,
    _laid_out,
    _pieces,
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


@pytest.mark.parametrize("avro_type", ["string", "long", "int",
                                       {"type": "record", "name": "R",
                                        "fields": [{"name": "a", "type": "long"}]}])
def test_a_sliced_column_is_encoded_from_its_own_offset(avro_type):
    """combine_chunks usually copies to offset 0; a column handed over as a slice is read
    from where it starts (strings' offsets and bytes, a struct's children)."""
    full = {"string": pa.array(["", "a", "é€", "bc", "xyz", "🎉"]),
            "long": pa.array([1, -2, 3, -4, 5, -6]), "int": pa.array([1, -2, 3, -4, 5, -6]),
            }.get(avro_type if isinstance(avro_type, str) else "",
                  pa.array([{"a": v} for v in (1, -2, 3, -4, 5, -6)]))
    schema = {"type": "record", "name": "S", "fields": [{"name": "f", "type": avro_type}]}
    for start in (1, 2, 5):
        part = full.slice(start)
        expected = [encode_columns(pa.table({"f": part.take([i])}), schema, b"")[0]
                    for i in range(len(part))]
        pieces = _pieces(avro_type, part, "f")
        assert _laid_out(pieces, len(part)) == expected


@pytest.mark.parametrize(("value", "fits"), [
    ((1 << 31) - 1, True), (-(1 << 31), True), (1 << 31, False), (-(1 << 31) - 1, False)])
def test_an_int_field_takes_exactly_the_32_bit_range(value, fits):
    row = {"sample_id": "s", "view_id": "v", "user_id": 1, "post_id": 1, "ts": 1,
           "context": "{}", "labels": {**dict.fromkeys(DEFAULT_SIGNALS, 0), "like": value}}
    labels = pa.struct([pa.field(s, pa.int64()) for s in DEFAULT_SIGNALS])
    table = pa.Table.from_pylist([row], SCHEMA.set(6, pa.field("labels", labels)))
    encoder = SampleEncoder()
    if fits:
        assert encoder.encode_table(table) == one_by_one(encoder, table)
    else:
        with pytest.raises(SampleEncodingError, match=r"labels\.like holds a value outside"):
            encoder.encode_table(table)


@pytest.mark.parametrize(("column", "message"), [
    (pa.array([None], pa.int64()), "user_id is null"),
    (pa.array([1 << 63], pa.uint64()), "outside Avro's long"),
    (pa.array([True]), "user_id is bool, not an integer"),
])
def test_a_long_that_cannot_be_written_is_refused_not_wrapped(column, message):
    table = pa.Table.from_pylist([{"sample_id": "s", "view_id": "v", "user_id": 1,
                                   "post_id": 1, "ts": 1, "context": "{}",
                                   "labels": dict.fromkeys(DEFAULT_SIGNALS, 0)}], SCHEMA)
    table = table.set_column(2, "user_id", column)
    with pytest.raises(SampleEncodingError, match=message):
        SampleEncoder().encode_table(table)


def test_dictionary_and_view_strings_are_encoded_as_plain_strings():
    table = pa.Table.from_pylist([{"sample_id": f"s{i}", "view_id": "v", "user_id": i,
                                   "post_id": 1, "ts": 1, "context": "{}",
                                   "labels": dict.fromkeys(DEFAULT_SIGNALS, 0)}
                                  for i in range(3)], SCHEMA)
    encoder = SampleEncoder()
    expected = one_by_one(encoder, table)
    for kind in (pa.string_view(), pa.dictionary(pa.int32(), pa.string())):
        changed = table.set_column(0, "sample_id", table["sample_id"].cast(kind))
        assert encoder.encode_table(changed) == expected


def test_the_encoder_falls_back_to_one_sample_at_a_time_for_a_type_it_does_not_write(
        monkeypatch):
    encoder = SampleEncoder()
    table = pa.Table.from_pylist([{"sample_id": "s", "view_id": "v", "user_id": 1,
                                   "post_id": 1, "ts": 1, "context": "{}",
                                   "labels": dict.fromkeys(DEFAULT_SIGNALS, 0)}], SCHEMA)

    def unsupported(*_args, **_kwargs):
        raise UnsupportedSchema("a type of a newer schema")

    monkeypatch.setattr(sample_avro, "encode_columns", unsupported)
    assert encoder.encode_table(table) == one_by_one(encoder, table)
