"""Spark forks its Python workers from a daemon that has imported what they use and frozen it
(streaming/worker_daemon.py): no worker imports pandas or a processor again, and no garbage
collection of a worker scans those modules' objects after each task."""

from __future__ import annotations

import subprocess
import sys

import pytest

from spark_jobs.streaming.spark_session import BASE_CONF
from spark_jobs.streaming.worker_daemon import PREIMPORTED


def test_sessions_start_their_workers_from_the_tideline_daemon():
    assert BASE_CONF["spark.python.daemon.module"] == "spark_jobs.streaming.worker_daemon"


def test_preimport_freezes_what_it_imported_and_skips_what_fails_with_a_warning():
    """In a process of its own: freezing is for the rest of the process's life."""
    script = (
        "import gc, sys\n"
        "from spark_jobs.streaming.worker_daemon import preimport\n"
        "failed = preimport(['json', 'tideline_no_such_module'])\n"
        "print(failed, 'json' in sys.modules, gc.get_freeze_count() > 1000)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "['tideline_no_such_module'] True True"
    assert "tideline_no_such_module not imported ahead" in done.stderr
    assert "ModuleNotFoundError" in done.stderr


def test_every_module_named_imports():
    """A typo in the list would only show as a warning in the daemon's stderr."""
    script = ("from spark_jobs.streaming.worker_daemon import preimport\n"
              "print(preimport())\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.strip() == "[]", done.stderr


@pytest.mark.spark
def test_a_python_worker_starts_with_the_modules_imported_and_frozen(spark):
    def worker_state(_rows):
        import gc
        import sys

        yield (gc.get_freeze_count(), all(name in sys.modules for name in PREIMPORTED))

    [(frozen, imported)] = spark.sparkContext.parallelize([0], 1).mapPartitions(
        worker_state).collect()
    assert imported
    assert frozen > 10_000  # pandas and pyarrow alone are tens of thousands of objects


@pytest.mark.spark
def test_a_pandas_udfs_nullable_integers_arrive_exact_through_the_direct_conversion(spark):
    """The daemon installed streaming/arrow_integers.py in its workers: a grouped pandas
    function sees int64 values beyond float precision and nulls as they were."""
    import pandas as pd

    def seen(frame: pd.DataFrame) -> pd.DataFrame:
        from pyspark.sql.conversion import ArrowArrayToPandasConversion

        direct = getattr(ArrowArrayToPandasConversion.convert_numpy.__func__,
                         "_tideline_direct_integers", False)
        values = [None if pd.isna(v) else int(v) for v in frame["v"]]
        return pd.DataFrame({"direct": [direct], "dtype": [str(frame["v"].dtype)],
                             "values": [",".join(map(str, sorted(values, key=str)))]})

    # PySpark's own path gives -2**53 in group 1 (through float64, beside a null, where the
    # largest value is exact as a float)
    rows = [(1, None), (1, -(2**53) - 1), (1, 0), (2, 2**62 + 1), (2, None)]
    got = (spark.createDataFrame(rows, "k long, v long").groupBy("k")
           .applyInPandas(seen, "direct boolean, dtype string, values string").collect())
    assert sorted(tuple(r) for r in got) == [
        (True, "Int64", f"-{2**53 + 1},0,None"), (True, "Int64", f"{2**62 + 1},None")]
