"""Pandas frames in and out of `applyInPandasWithState`, without Spark row objects.

In: a bucket's frames become one record per row, a named tuple of the columns a processor
reads (the per-key logic reads fields by name, as it did on Spark Rows). Integer columns
arrive as pandas' nullable Int64 (the session sets
`spark.sql.execution.pythonUDF.pandas.preferIntExtensionDtype`: a null in a float64 column
would round large int64 values), and every null becomes None.

Out: output rows (tuples in schema order) become one frame whose integer and boolean
columns are nullable pandas arrays, so Spark's Arrow conversion keeps every value exact.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql.types import (
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    StructType,
)

if TYPE_CHECKING:  # imported where frames are read or built: stateful processors import this
    import pandas as pd  # module, and Spark's driver loads those without pandas (their schemas)

_NULLABLE_DTYPES: dict[type[DataType], str] = {
    LongType: "Int64", IntegerType: "Int32", BooleanType: "boolean"}


def column_values(series: pd.Series) -> list[Any]:
    """A column as Python values, None for a null (None, NaN or pd.NA)."""
    import pandas as pd

    if series.dtype == object:  # one pass (hasnans would cost more than this)
        return [None if v is None or v is pd.NA or (isinstance(v, float) and v != v) else v
                for v in series.tolist()]
    return series.to_numpy(dtype=object, na_value=None).tolist()  # one call, nulls or not


def record_type(fields: Sequence[str]) -> type:
    """The named tuple of one input row's `fields`."""
    return namedtuple("Record", fields)  # type: ignore[misc]


def records(frames: Iterable[pd.DataFrame], record: type) -> list[Any]:
    """Every row of `frames` as a `record` (its fields taken from the frames' columns)."""
    fields: Sequence[str] = record._fields  # type: ignore[attr-defined]
    out: list[Any] = []
    make = record._make  # type: ignore[attr-defined]
    for frame in frames:
        if len(frame) == 0:
            continue
        columns = [column_values(frame[name]) for name in fields]
        out.extend(map(make, zip(*columns, strict=True)))
    return out


def to_frame(rows: Sequence[Sequence[Any]], schema: StructType) -> pd.DataFrame:
    """Output rows (tuples in `schema` order) as one frame of exact, nullable columns."""
    import pandas as pd

    names = schema.fieldNames()
    if not rows:
        return pd.DataFrame({name: pd.Series([], dtype=_dtype(schema[name].dataType))
                             for name in names})
    columns = list(zip(*rows, strict=True))
    return pd.DataFrame({
        name: pd.array(list(values), dtype=_dtype(schema[name].dataType))
        for name, values in zip(names, columns, strict=True)
    })


def _dtype(data_type: DataType) -> str:
    return _NULLABLE_DTYPES.get(type(data_type), "object")
