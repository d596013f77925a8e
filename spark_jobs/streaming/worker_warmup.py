"""Start a job's Python workers while Spark plans its query, not in its first micro-batch.

Why: Spark starts a Python daemon (streaming/worker_daemon.py, which imports what the workers
use before it forks them) the first time a task needs a Python worker, and a second one for
transformWithState tasks, whose workers get other environment variables. Each start cost a
job's first micro-batch ~1.2-1.4 s (in one session: the first mapInArrow 1.38 s against
0.14 s after it, the first transformWithState 1.45 s against 0.23 s; BENCHMARKS.md, sixteenth
session), while the driver had just spent ~1.5 s importing and planning the job with a core
to spare. A tiny job of each kind the query uses, run in a background thread as soon as the
session exists, starts the daemons during that time.

Each kind is warmed once per Spark application (a session that runs several jobs, as the
tests do, starts its daemons once). A warm-up that fails is logged and changes nothing: the
query then starts the daemon itself, as without this module.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pandas and pyarrow load with the job's module, not with the command
    import pyarrow as pa
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# the daemons a query can need: one for every Python task but transformWithState's
ARROW, STATE = "arrow", "transformWithState"
ROWS = 4  # two tasks of two rows: each of local[2]'s cores starts a worker
DESCRIPTION = "tideline: start the Python workers"

_warmed: set[tuple[str, str]] = set()  # (application id, kind)
_lock = threading.Lock()


def _identity(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield from batches


def run_warm_up(spark: SparkSession, kind: str) -> int:
    """Run the tiny job of `kind` now; the rows it returned (ROWS, or 2 keys for STATE)."""
    if kind not in (ARROW, STATE):
        raise ValueError(f"unknown warm-up {kind!r}: {ARROW!r} or {STATE!r}")
    rows = spark.range(ROWS, numPartitions=2)
    if kind == ARROW:
        job = rows.mapInArrow(_identity, "id long")
    else:
        from spark_jobs.streaming.warmup_processor import Echo

        job = rows.selectExpr("id % 2 AS k").groupBy("k").transformWithStateInPandas(
            Echo(), "k long", "Append", "None")
    spark.sparkContext.setLocalProperty("spark.job.description", DESCRIPTION)
    try:
        return len(job.collect())
    finally:
        spark.sparkContext.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]


def start_warm_up(spark: SparkSession, kinds: Sequence[str]) -> threading.Thread | None:
    """Warm `kinds` one after the other in a background thread (the first is needed first),
    leaving out those this application warmed already; None when none is left."""
    application = spark.sparkContext.applicationId
    with _lock:
        todo = [kind for kind in kinds if (application, kind) not in _warmed]
        _warmed.update((application, kind) for kind in todo)
    if not todo:
        return None

    def warm() -> None:
        for kind in todo:
            try:
                run_warm_up(spark, kind)
            except Exception as exc:  # the query starts its daemon itself, as without this
                log.info("warming the Python workers (%s) failed: %s", kind, exc)

    thread = threading.Thread(target=warm, name="tideline-warm-up", daemon=True)
    thread.start()
    return thread
