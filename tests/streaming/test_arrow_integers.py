"""The workers' integer conversion (streaming/arrow_integers.py) gives PySpark's own Series,
with every value exact (PySpark's own path rounds some large values beside a null)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.conversion import ArrowArrayToPandasConversion
from pyspark.sql.types import ByteType, IntegerType, LongType, ShortType, StringType

from spark_jobs.streaming import arrow_integers

TYPES = [(ByteType(), pa.int8(), 8), (ShortType(), pa.int16(), 16),
         (IntegerType(), pa.int32(), 32), (LongType(), pa.int64(), 64)]


@pytest.fixture
def installed() -> Iterator[None]:
    """install() for the test, PySpark's converter put back after it."""
    original = ArrowArrayToPandasConversion.__dict__["convert_numpy"]
    assert arrow_integers.install()
    assert arrow_integers.install(), "a second install is a no-op that still says yes"
    yield
    ArrowArrayToPandasConversion.convert_numpy = original


def _original(arr, spark_type, **kwargs):
    return ArrowArrayToPandasConversion.convert_numpy.__func__.__wrapped__(
        ArrowArrayToPandasConversion, arr, spark_type, **kwargs)


def _converted(arr, spark_type, **kwargs):
    return ArrowArrayToPandasConversion.convert_numpy(arr, spark_type, **kwargs)


def _exact(arr, dtype: str, name) -> pd.Series:
    """The values of `arr` as a nullable Series, built without any float on the way."""
    values = arr.to_pylist()
    data = np.array([0 if v is None else v for v in values], dtype=dtype.lower())
    return pd.Series(pd.arrays.IntegerArray(data, np.array([v is None for v in values],
                                                            dtype=bool)), name=name)


@st.composite
def integer_columns(draw):
    spark_type, arrow_type, bits = draw(st.sampled_from(TYPES))
    value = st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    chunks = draw(st.lists(st.lists(st.one_of(st.none(), value), max_size=30), max_size=3))
    if draw(st.booleans()):
        return spark_type, pa.chunked_array([pa.array(c, arrow_type) for c in chunks],
                                            type=arrow_type)
    return spark_type, pa.array([v for c in chunks for v in c], arrow_type)


@settings(max_examples=300, deadline=None,  # the fixture installs once for all
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(integer_columns(), st.sampled_from([None, "col"]))
def test_integers_with_or_without_nulls_convert_as_pyspark_does(installed, column, name
                                                                ) -> None:
    spark_type, arr = column
    pyspark = _original(arr, spark_type, ser_name=name, prefer_int_ext_dtype=True)
    got = _converted(arr, spark_type, ser_name=name, prefer_int_ext_dtype=True)
    pd.testing.assert_series_equal(got, _exact(arr, str(pyspark.dtype), name), check_exact=True)
    assert got.name == pyspark.name and str(got.dtype) == str(pyspark.dtype)
    assert got.index.equals(pyspark.index)
    if len(got):
        got.iloc[0] = 1  # writable, as PySpark's Series are


def test_a_large_value_beside_a_null_is_exact_where_pysparks_path_rounds_it(installed) -> None:
    arr = pa.array([None, 0, -(2**53) - 1], pa.int64())
    assert _original(arr, LongType(), prefer_int_ext_dtype=True).tolist()[2] == -(2**53)
    assert _converted(arr, LongType(), prefer_int_ext_dtype=True).tolist()[2] == -(2**53) - 1


def test_another_arrow_type_than_the_spark_types_takes_pysparks_path(installed) -> None:
    """PySpark's own checks apply (an unsigned or wider value does not wrap around)."""
    wide = pa.array([300, None], pa.int64())
    with pytest.raises((TypeError, ValueError, OverflowError)):
        _converted(wide, ByteType(), prefer_int_ext_dtype=True)
    narrow = _converted(pa.array([7, None], pa.int32()), LongType(), prefer_int_ext_dtype=True)
    assert narrow.tolist() == [7, pd.NA] and str(narrow.dtype) == "Int64"


def test_a_batch_columns_name_and_the_other_paths_are_pysparks(installed) -> None:
    batch = pa.RecordBatch.from_pydict({"user_id": pa.array([1, None, 2**62], pa.int64())})
    got = _converted(batch.column(0), LongType(), prefer_int_ext_dtype=True)
    expected = _original(batch.column(0), LongType(), prefer_int_ext_dtype=True)
    pd.testing.assert_series_equal(got, expected, check_exact=True)
    assert got.tolist() == [1, pd.NA, 2**62]
    plain = _converted(pa.array([1, 2], pa.int64()), LongType())  # no extension dtype asked
    assert str(plain.dtype) == "int64"
    text = _converted(pa.array(["a", None]), StringType(), prefer_int_ext_dtype=True)
    assert text.tolist() == ["a", None]


def test_nothing_is_changed_for_a_converter_it_does_not_know(monkeypatch) -> None:
    monkeypatch.setattr(ArrowArrayToPandasConversion, "convert_numpy",
                        classmethod(lambda cls, arr, spark_type: None))
    assert not arrow_integers.install()
    assert ArrowArrayToPandasConversion.convert_numpy(pa.array([1]), LongType()) is None
