"""Spark's Python daemon, with what the workers import imported once, before it forks them.

Why: Spark starts its Python workers by forking a daemon (`pyspark.daemon`). Each worker then
imported pandas, pyarrow, pyspark's Arrow and state-client modules and the job's processors
on its own (~0.6 CPU s per worker), and the daemon has every reused worker run a full
`gc.collect()` after each task, which scanned those modules' ~80k objects again: ~30-37 ms
per task, ~2.6 CPU s of a training_samples run of 242k records (BENCHMARKS.md, "the Python
workers' imports done once"). Imported here and frozen (`gc.freeze`) before any fork, the
modules are in every worker from its first instruction and no collection of a worker visits
them again.

Forking after these imports: numpy's OpenBLAS and pyarrow's jemalloc start native threads,
and both stop or reset them around a fork (checked: children start with one thread and run
BLAS and multi-threaded Arrow conversions). OpenBLAS is held to one thread unless the
environment says otherwise: a task uses one core, and each worker would start a thread per
core.

The daemon also installs the workers' direct conversion of nullable integer columns
(streaming/arrow_integers.py) before it forks them.

`spark.python.daemon.module` names this module (streaming/spark_session.py BASE_CONF); Spark
runs it with `python -m` in each executor's Python, which imports this package as the driver
does (the same virtualenv).
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
from collections.abc import Sequence

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy is imported (see above)

import pyspark.daemon

from spark_jobs.streaming import arrow_integers

# What the workers of Tideline's jobs import (their UDFs' modules and what those pull in).
PREIMPORTED: tuple[str, ...] = (
    "pandas",
    "pyarrow",
    "pyspark.sql.pandas.serializers",
    "pyspark.sql.streaming.stateful_processor_api_client",
    "pyspark.sql.streaming.stateful_processor_util",
    # GroupState.update imports it at its first call (PySpark 4.3): 16 ms a worker otherwise
    "pyspark.testing.utils",
    "spark_jobs.experiments.processors.cap_processor",
    "spark_jobs.experiments.processors.metrics_processor",
    "spark_jobs.fraud.processors.shard_processor",
    "spark_jobs.samples.processors.dedup_processor",
    "spark_jobs.samples.processors.join_processor",
)


def preimport(names: Sequence[str] = PREIMPORTED) -> list[str]:
    """Import `names`, then freeze everything alive so that no collection scans it again.
    A module that fails to import is skipped with a warning on stderr (the daemon's stdout
    is Spark's channel): a worker that needs it then raises the import's own error. Returns
    the names that failed."""
    failed = []
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:  # any failure: a worker that needs it reports it itself
            failed.append(name)
            print(f"tideline worker daemon: {name} not imported ahead ({exc!r})",
                  file=sys.stderr)
    gc.collect()  # what is garbage now is not frozen
    gc.freeze()
    return failed


if __name__ == "__main__":
    if not arrow_integers.install():
        print("tideline worker daemon: PySpark's integer conversion left as it is",
              file=sys.stderr)
    preimport()
    pyspark.daemon.manager()
