"""The workers' integer conversion (streaming/arrow_integers.py) gives PySpark's own Series."""

from __future__ import annotations

from collections.abc import Iterator

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
    expected = _original(arr, spark_type, ser_name=name, prefer_int_ext_dtype=True)
    got = _converted(arr, spark_type, ser_name=name, prefer_int_ext_dtype=True)
    pd.testing.assert_series_equal(got, expected, check_exact=True)
    assert got.name == expected.name and str(got.dtype) == str(expected.dtype)


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
