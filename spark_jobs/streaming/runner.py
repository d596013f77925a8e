"""Run a streaming job by name: `tideline job run NAME [--available-now]`.

The job catalog names the job's module, which provides `build(spark, settings) -> DataFrame`
(the streaming plan), `sink(spark, settings)` (its foreachBatch sink) and
`python_daemons(settings)` (the Python daemons its query needs, started while it is planned:
streaming/worker_warmup.py); the runner creates the topics of the job's system, adds the
checkpoint, trigger, query name, progress reporting and a clean stop on SIGTERM/SIGINT.
"""

from __future__ import annotations

import importlib
import logging
import signal
import threading
from collections.abc import Callable
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from spark_jobs.catalog import job, system_topics
from spark_jobs.settings import Settings
from spark_jobs.streaming.application import write_application
from spark_jobs.streaming.kafka.topic_admin import check_kafka, ensure_topics
from spark_jobs.streaming.progress import ProgressFileListener
from spark_jobs.streaming.spark_session import build_session
from spark_jobs.streaming.state_layout import state_layout_advice
from spark_jobs.streaming.timing import batches, mark
from spark_jobs.streaming.worker_warmup import start_warm_up

log = logging.getLogger(__name__)


def start_job(
    spark: SparkSession, settings: Settings, name: str, available_now: bool = False,
    wrap_sink: Callable[[Any], Any] | None = None,
) -> tuple[StreamingQuery, Any]:
    """Start the job's query on an existing session; returns the query and its sink
    (`wrap_sink` lets a benchmark time the sink without another copy of this wiring)."""
    entry = job(name)
    module = importlib.import_module(entry.module)  # only the job it starts: no other's imports
    # its Python daemons start while the job is planned (streaming/worker_warmup.py)
    start_warm_up(spark, module.python_daemons(settings))
    mark(name, "module_imported")
    ensure_topics(settings.kafka, system_topics(entry.system), settings.kafka.partitions)
    mark(name, "topics_ready")
    sink = module.sink(spark, settings)
    warm = getattr(sink, "warm", None)
    if warm is not None:
        warm()  # its producer gets ready while Spark plans and starts the query
    mark(name, "sink_ready")
    if wrap_sink is not None:
        sink = wrap_sink(sink)
    writer = (
        module.build(spark, settings)
        .writeStream.queryName(name)
        .option("checkpointLocation", settings.lake.checkpoint(name))
        .foreachBatch(sink)
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{settings.jobs.trigger_ms} milliseconds")
    mark(name, "plan_built")
    query = writer.start()
    mark(name, "query_started")
    return query, sink


def _close_sink(sink: Any) -> Exception | None:
    """Close the sink; its failure (e.g. fraud's last batch, delivered at close) is returned,
    so that the job's final status is still written before it is raised."""
    close = getattr(sink, "close", None)
    if close is None:
        return None
    try:
        close()
    except Exception as exc:
        log.error("closing the sink failed: %s", exc)
        return exc
    return None


def run_job(settings: Settings, name: str, available_now: bool = False) -> None:
    """Run until the query ends (available-now) or a stop signal arrives; raise on failure.

    The signal handler only sets a flag: py4j calls from a handler while the main thread waits
    in the JVM can deadlock, so the main loop polls and stops the query itself.
    """
    mark(name, "entered")
    job(name)
    check_kafka(settings.kafka)
    mark(name, "kafka_checked")
    spark = build_session(settings, app_name=f"tideline-{name}", tools=True)
    mark(name, "session_ready")
    write_application(settings, name, spark)
    listener = ProgressFileListener(settings, name)
    spark.streams.addListener(listener)
    query, sink = start_job(spark, settings, name, available_now)
    stopping = threading.Event()

    def stop(signum: int, _frame: Any) -> None:
        log.info("signal %s: stopping %s", signum, name)
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        while not query.awaitTermination(1):
            if stopping.is_set():
                query.stop()
        mark(name, "query_ended")
        batches(name, query.recentProgress)
    finally:
        closing = _close_sink(sink)
        mark(name, "sink_closed")
    failure = None if query.exception() is None else str(query.exception())
    if failure is None and closing is not None:
        failure = f"closing the sink failed: {closing}"
    advice = None if failure is None else state_layout_advice(
        name, failure, settings.lake.checkpoint(name))
    if not query.isActive:
        listener.write_final(advice or failure)
    # the listener bus delivers onQueryTerminated late: to a Python side that is exiting, it
    # fails with a stack trace in the log; the final status is written above already
    spark.streams.removeListener(listener)
    mark(name, "returning")
    if failure is not None and not stopping.is_set():
        raise RuntimeError(advice or f"job {name} failed: {failure}")
