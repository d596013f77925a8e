"""Start a job's Python workers while Spark plans its query, not in its first micro-batch.

Why: Spark starts a Python daemon (streaming/worker_daemon.py, which imports what the workers
use before it forks them) the first time a task needs a Python worker, and a second one for
transformWithState tasks, whose workers get other environment variables. Each start cost a
job's first micro-batch ~1.2-1.4 s (in one session: the first mapInArrow 1.38 s against
0.14 s after it, the first transformWithState 1.45 s against 0.23 s; BENCHMARKS.md, sixteenth
session), after the driver had spent ~1.5 s importing and planning the job. A tiny job of
each kind the query uses, run in a background thread as soon as the job is imported, starts
the daemons during that time (it slows the planning a little: the cores are not idle).

Each kind is warmed once per Spark application (a session that runs several jobs, as the
tests do, starts its daemons once); an executor that replaces a lost one starts its daemons
in a batch, as before. A warm-up that fails is logged and changes nothing: the query then
starts the daemon itself, as without this module.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pandas and pyarrow load with the job's module, not with the command
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

# the daemons a query can need: one for every Python task but transformWithState's
ARROW, STATE = "arrow", "transformWithState"
GROUP = "tideline-warm-up"  # the warm-up jobs' group (and description) in Spark's UI
PROPERTIES = ("spark.jobGroup.id", "spark.job.description")

_warmed: set[tuple[str, str]] = set()  # (application id, kind)
_lock = threading.Lock()


def _identity(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield from batches


def warm_up_job(spark: SparkSession, kind: str) -> DataFrame:
    """The tiny job of `kind`: a task on every core the application has, each starting a
    worker (a cluster's executors each start their daemon)."""
    if kind not in (ARROW, STATE):
        raise ValueError(f"unknown warm-up {kind!r}: {ARROW!r} or {STATE!r}")
    tasks = max(2, spark.sparkContext.defaultParallelism)
    rows = spark.range(2 * tasks, numPartitions=tasks)
    if kind == ARROW:
        return rows.mapInArrow(_identity, "id long")
    from spark_jobs.streaming.warmup_processor import Echo

    return rows.selectExpr(f"id % {tasks} AS k").groupBy("k").transformWithStateInPandas(
        Echo(), "k long", "Append", "None")


def run_warm_up(spark: SparkSession, kind: str) -> int:
    """Run the tiny job of `kind` now, in the warm-up's job group; the rows it returned."""
    job = warm_up_job(spark, kind)
    context = spark.sparkContext
    for name in PROPERTIES:
        context.setLocalProperty(name, GROUP)
    try:
        return len(job.collect())
    finally:  # a caller's later jobs are not the warm-up's
        for name in PROPERTIES:
            context.setLocalProperty(name, None)  # type: ignore[arg-type]


def start_warm_up(spark: SparkSession, kinds: Sequence[str]) -> threading.Thread | None:
    """Warm `kinds` one after the other in a background thread (the first is needed first),
    leaving out those this application warmed already; None when none is left. Never raises:
    without a warm-up the query starts its daemons itself."""
    try:
        application = spark.sparkContext.applicationId
        with _lock:
            todo = [kind for kind in kinds if (application, kind) not in _warmed]
            _warmed.update((application, kind) for kind in todo)
        if not todo:
            return None
        thread = threading.Thread(target=_warm, args=(spark, todo), name=GROUP, daemon=True)
        thread.start()
        return thread
    except Exception as exc:
        log.info("starting the Python workers' warm-up failed: %s", exc)
        return None


def _warm(spark: SparkSession, kinds: Sequence[str]) -> None:
    for kind in kinds:
        try:
            run_warm_up(spark, kind)
        except Exception as exc:
            log.info("warming the Python workers (%s) failed: %s", kind, exc)
