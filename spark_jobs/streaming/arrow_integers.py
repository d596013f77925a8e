"""Spark's Arrow-to-pandas conversion of integer columns in the Python workers, exact and
without a Python object per value when a column has nulls.

Why: the jobs set `spark.sql.execution.pythonUDF.pandas.preferIntExtensionDtype` (a null in a
float64 column would round large int64 values), so PySpark 4.3 turns each integer column of
a pandas UDF's input into a nullable pandas array by
`arr.to_pandas(types_mapper=pd.ArrowDtype).astype(pd.Int64Dtype())`. When the column holds a
null, pandas does that cast value by value through Python objects: 1.8 ms per 10k values
against 0.05 ms built from the Arrow buffers (values with the nulls zeroed, and the null
mask), measured on this machine; 7.8 % of the Python workers' CPU in the pipeline benchmark
(BENCHMARKS.md, eighteenth session). That cast also goes through float64 and checks only the
largest value for lost precision, so a value below -2**53 beside a null comes out rounded
(pandas 2.3.3: [None, 0, -2**53 - 1] gives -2**53). `install()` wraps PySpark's converter so
that integer columns whose Arrow type is the Spark type's take the direct path, every other
column the original one; the result is PySpark's Series (dtype, index, name, writable
values) with every value exact, checked by tests.

Installed by the worker daemon (streaming/worker_daemon.py) before it forks the workers.
When the converter is not what this module knows (another PySpark), nothing is changed.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import ByteType, DataType, IntegerType, LongType, ShortType

_NUMPY_TYPES: dict[type[DataType], Any] = {
    ByteType: np.int8, ShortType: np.int16, IntegerType: np.int32, LongType: np.int64}
_MARK = "_tideline_direct_integers"


def integer_series(arr: pa.Array | pa.ChunkedArray, numpy_type: Any, name: Any) -> pd.Series:
    """A nullable pandas integer Series of `arr`'s values, built from its buffers."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    filled = pc.fill_null(arr, 0) if arr.null_count else arr
    # a copy: Arrow's buffers are read-only, PySpark's Series are not
    data = np.array(filled.to_numpy(zero_copy_only=False), dtype=numpy_type)
    mask = arr.is_null().to_numpy(zero_copy_only=False)
    return pd.Series(pd.arrays.IntegerArray(data, mask), name=name)


def _knows(converter: Any) -> bool:
    """True when `converter` is PySpark's convert_numpy as this module was written for."""
    function = getattr(converter, "__func__", None)
    if function is None:
        return False
    parameters = inspect.signature(function).parameters
    return all(name in parameters for name in (
        "arr", "spark_type", "ser_name", "prefer_int_ext_dtype", "df_for_struct"))


def install() -> bool:
    """Wrap PySpark's convert_numpy (once); False when it is not the one this module knows."""
    try:
        from pyspark.sql.conversion import ArrowArrayToPandasConversion
    except ImportError:
        return False
    original = ArrowArrayToPandasConversion.__dict__.get("convert_numpy")
    if getattr(getattr(original, "__func__", None), _MARK, False):
        return True
    if not isinstance(original, classmethod) or not _knows(original):
        return False
    function = original.__func__

    def convert_numpy(cls: Any, arr: Any, spark_type: DataType, *args: Any,
                      **kwargs: Any) -> Any:
        numpy_type = _NUMPY_TYPES.get(type(spark_type))
        if (numpy_type is not None and not args and kwargs.get("prefer_int_ext_dtype")
                and not kwargs.get("df_for_struct")
                and arr.type == pa.from_numpy_dtype(numpy_type)):
            name = kwargs.get("ser_name")
            return integer_series(arr, numpy_type,
                                  getattr(arr, "_name", None) if name is None else name)
        return function(cls, arr, spark_type, *args, **kwargs)

    setattr(convert_numpy, _MARK, True)
    convert_numpy.__wrapped__ = function  # type: ignore[attr-defined]
    ArrowArrayToPandasConversion.convert_numpy = classmethod(convert_numpy)  # type: ignore[method-assign,assignment]
    return True
