"""A batch of samples as Avro messages, column by column, byte for byte what fastavro writes.

Publishing encoded each sample on its own in the driver: a row turned into a dict
(`to_pylist`, 2-3 us) and fastavro's `schemaless_writer` (5.3 us), most of the Python time
of a training_samples batch that closes many views (BENCHMARKS.md, seventeenth session).
Here each field of the whole batch is encoded at once with NumPy (zig-zag varints for
int and long, length-prefixed UTF-8 for strings, branch indexes for ["null", T] unions,
records as their fields in order), and Arrow joins the pieces message by message. For valid
samples the bytes are fastavro's; where fastavro writes what the schema does not allow (a
value outside an int's 32 bits, a bool for an int), this refuses it. The types a sample
schema uses are supported; any other type raises UnsupportedSchema, so the caller can keep
the per-sample path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

Piece = tuple[np.ndarray, np.ndarray]  # per-message byte counts, their bytes in message order
_VARINT_BYTES = 10  # a zig-zag encoded 64-bit value takes at most ten 7-bit groups
_INT32 = (-(1 << 31), (1 << 31) - 1)


class UnsupportedSchema(ValueError):
    """A schema this encoder does not write (the per-sample encoder still does)."""


class ColumnError(ValueError):
    """A column that does not fit its field (missing, null, out of range, unknown)."""


def varints(values: np.ndarray) -> Piece:
    """Avro's zig-zag varint of each int64 value."""
    signed = values.astype(np.int64, copy=False)
    zigzag = ((signed << 1) ^ (signed >> 63)).view(np.uint64)
    counts = np.ones(len(zigzag), dtype=np.int64)
    for group in range(1, _VARINT_BYTES):
        counts += zigzag >= np.uint64(1 << (7 * group))
    groups = np.empty((len(zigzag), _VARINT_BYTES), dtype=np.uint8)
    for group in range(_VARINT_BYTES):
        low = (zigzag >> np.uint64(7 * group)) & np.uint64(0x7F)
        more = np.where(group < counts - 1, 0x80, 0).astype(np.uint64)
        groups[:, group] = (low | more).astype(np.uint8)
    used = np.arange(_VARINT_BYTES)[None, :] < counts[:, None]
    return counts, groups[used]


def _without_nulls(column: pa.Array, name: str) -> pa.Array:
    if column.null_count:
        raise ColumnError(f"{name} is null in {column.null_count} sample(s)")
    return column


def _integers(column: pa.Array, name: str, bounds: tuple[int, int] | None) -> np.ndarray:
    if not pa.types.is_integer(column.type):
        raise ColumnError(f"{name} is {column.type}, not an integer")
    try:  # a safe cast: an unsigned value above the int64 range is refused, not wrapped
        column = _without_nulls(column, name).cast(pa.int64())
    except pa.ArrowInvalid as exc:
        raise ColumnError(f"{name} holds a value outside Avro's long (64-bit)") from exc
    values = column.to_numpy(zero_copy_only=False)
    if bounds and len(values) and (values.min() < bounds[0] or values.max() > bounds[1]):
        raise ColumnError(f"{name} holds a value outside Avro's int (32-bit)")
    return values


def _strings(column: pa.Array, name: str) -> list[Piece]:
    value_type = (column.type.value_type if pa.types.is_dictionary(column.type)
                  else column.type)
    if not (pa.types.is_string(value_type) or pa.types.is_large_string(value_type)
            or pa.types.is_string_view(value_type)):
        raise ColumnError(f"{name} is {column.type}, not a string")
    column = _without_nulls(column, name).cast(pa.large_string())
    offsets = np.frombuffer(column.buffers()[1], dtype=np.int64)[
        column.offset:column.offset + len(column) + 1]
    data = column.buffers()[2]
    text = (np.frombuffer(data, dtype=np.uint8)[offsets[0]:offsets[-1]] if data is not None
            else np.empty(0, dtype=np.uint8))
    lengths = np.diff(offsets)
    return [varints(lengths), (lengths, text)]


def _pieces(avro_type: Any, column: pa.Array, name: str) -> list[Piece]:
    """The pieces of one field, for every message."""
    if avro_type == "string":
        return _strings(column, name)
    if avro_type in ("long", "int"):
        return [varints(_integers(column, name, _INT32 if avro_type == "int" else None))]
    if isinstance(avro_type, list):
        return _union(avro_type, column, name)
    if isinstance(avro_type, dict) and avro_type.get("type") == "record":
        if not pa.types.is_struct(column.type):
            raise ColumnError(f"{name} is {column.type}, not a record")
        _without_nulls(column, name)
        children = dict(zip((f.name for f in column.type), column.flatten(), strict=True))
        known = set(children)
        pieces: list[Piece] = []
        for field in avro_type["fields"]:
            if field["name"] not in known:
                raise ColumnError(f"{name}.{field['name']} is missing")
            pieces += _pieces(field["type"], children[field["name"]],
                              f"{name}.{field['name']}")
        extra = known - {field["name"] for field in avro_type["fields"]}
        if extra:
            raise ColumnError(f"{name} has fields the schema does not: {sorted(extra)}")
        return pieces
    raise UnsupportedSchema(f"{name}: Avro type {avro_type!r}")


def _union(branches: list[Any], column: pa.Array, name: str) -> list[Piece]:
    """["null", T]: branch 0 for a null, else branch 1 and the value."""
    if len(branches) != 2 or branches[0] != "null" or branches[1] not in ("long", "int"):
        raise UnsupportedSchema(f"{name}: union {branches!r}")
    if not (pa.types.is_integer(column.type) or pa.types.is_null(column.type)):
        raise ColumnError(f"{name} is {column.type}, not an integer")
    present = column.is_valid().to_numpy(zero_copy_only=False)
    index_counts, index_bytes = varints(present.astype(np.int64))
    filled = column.cast(pa.int64()).fill_null(0) if column.null_count else column
    bounds = _INT32 if branches[1] == "int" else None
    counts, data = varints(_integers(filled, name, bounds))
    keep = np.repeat(present, counts)
    return [(index_counts, index_bytes), (np.where(present, counts, 0), data[keep])]


def _constant(value: Any, rows: int, name: str) -> pa.Array:
    """A field the table leaves out, as its filled value in every row."""
    if value is None:
        return pa.nulls(rows, pa.int64())
    try:
        return pa.repeat(pa.scalar(value), rows)
    except (pa.ArrowInvalid, OverflowError) as exc:
        raise ColumnError(f"{name}: its value {value!r} cannot be written") from exc


def encode_columns(table: pa.Table, schema: Mapping[str, Any], header: bytes,
                   fill: Mapping[str, Any] | None = None) -> list[bytes]:
    """`header` + the Avro body of each row of `table` under the parsed record `schema`.
    A field missing from the table takes its value from `fill`; a column the schema does not
    have, a null in a field that cannot be null, or a value of the wrong type raises
    ColumnError; a type this encoder does not write raises UnsupportedSchema."""
    rows, fill = table.num_rows, fill or {}
    names = {field["name"] for field in schema["fields"]}
    extra = set(table.column_names) - names
    if extra:
        raise ColumnError(f"columns the schema does not have: {sorted(extra)}")
    prefix = np.frombuffer(header, dtype=np.uint8)
    pieces: list[Piece] = [(np.full(rows, len(header), dtype=np.int64), np.tile(prefix, rows))]
    for field in schema["fields"]:
        name = field["name"]
        if name in table.column_names:
            column = table.column(name).combine_chunks()
        elif name in fill:
            column = _constant(fill[name], rows, name)
        else:
            raise ColumnError(f"{name} is missing")
        pieces += _pieces(field["type"], column, name)
    return _laid_out(pieces, rows)


def _laid_out(pieces: list[Piece], rows: int) -> list[bytes]:
    """Each message's pieces one after another. Arrow joins them row by row in C++, in
    memory of the output's size (an index per byte, in NumPy, took 16 times that)."""
    columns = []
    for counts, data in pieces:
        offsets = np.zeros(rows + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        columns.append(pa.LargeBinaryArray.from_buffers(
            pa.large_binary(), rows,
            [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(data))]))
    return pc.binary_join_element_wise(*columns, pa.scalar(b"", pa.large_binary())).to_pylist()
