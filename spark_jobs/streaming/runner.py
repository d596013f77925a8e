"""Run a streaming job by name: `tideline job run NAME [--available-now]`.

Each job module provides `build(spark, settings) -> DataFrame` (the streaming plan) and a
sink class for foreachBatch; the runner adds the checkpoint, trigger, query name, progress
reporting and a clean stop on SIGTERM/SIGINT.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from spark_jobs.contracts.topics import EXPERIMENT_TOPICS, FRAUD_TOPICS, SAMPLES_TOPICS
from spark_jobs.experiments.jobs import experiment_metrics, filter_activations, filter_events
from spark_jobs.fraud.jobs import fraud_driver, fraud_rules
from spark_jobs.samples.jobs import training_samples
from spark_jobs.settings import Settings
from spark_jobs.streaming.kafka.admin import check_kafka, ensure_topics
from spark_jobs.streaming.progress import ProgressFileListener
from spark_jobs.streaming.spark_session import build_session

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobSpec:
    build: Callable[[SparkSession, Settings], DataFrame]
    sink: Callable[[SparkSession, Settings], Any]
    topics: tuple[str, ...]


JOBS: dict[str, JobSpec] = {
    filter_events.NAME: JobSpec(
        filter_events.build, lambda _spark, s: filter_events.FilteredEventsSink(s),
        EXPERIMENT_TOPICS,
    ),
    filter_activations.NAME: JobSpec(
        filter_activations.build, filter_activations.FilteredActivationsSink,
        EXPERIMENT_TOPICS,
    ),
    experiment_metrics.NAME: JobSpec(
        experiment_metrics.build, lambda _spark, s: experiment_metrics.MetricsSink(s),
        EXPERIMENT_TOPICS,
    ),
    fraud_rules.NAME: JobSpec(fraud_rules.build, lambda _spark, s: fraud_sink(s), FRAUD_TOPICS),
    training_samples.NAME: JobSpec(
        training_samples.build, lambda _spark, s: training_samples.TrainingSamplesSink(s),
        SAMPLES_TOPICS,
    ),
}


def fraud_sink(settings: Settings) -> Any:
    """The engine in the driver's sink (fraud.state: driver) or only publishing (spark)."""
    if settings.fraud.state == "driver":
        return fraud_driver.FraudDriverSink(settings)
    return fraud_rules.FraudAlertsSink(settings)


class UnknownJobError(ValueError):
    pass


def job_spec(name: str) -> JobSpec:
    try:
        return JOBS[name]
    except KeyError:
        raise UnknownJobError(f"unknown job {name!r} (known: {', '.join(sorted(JOBS))})") from None


def start_job(
    spark: SparkSession, settings: Settings, name: str, available_now: bool = False,
    wrap_sink: Callable[[Any], Any] | None = None,
) -> tuple[StreamingQuery, Any]:
    """Start the job's query on an existing session; returns the query and its sink
    (`wrap_sink` lets a benchmark time the sink without another copy of this wiring)."""
    spec = job_spec(name)
    ensure_topics(settings.kafka, spec.topics, settings.kafka.partitions)
    sink = spec.sink(spark, settings)
    if wrap_sink is not None:
        sink = wrap_sink(sink)
    writer = (
        spec.build(spark, settings)
        .writeStream.queryName(name)
        .option("checkpointLocation", settings.lake.checkpoint(name))
        .foreachBatch(sink)
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{settings.jobs.trigger_ms} milliseconds")
    return writer.start(), sink


def run_job(settings: Settings, name: str, available_now: bool = False) -> None:
    """Run until the query ends (available-now) or a stop signal arrives; raise on failure.

    The signal handler only sets a flag: py4j calls from a handler while the main thread waits
    in the JVM can deadlock, so the main loop polls and stops the query itself.
    """
    job_spec(name)
    check_kafka(settings.kafka)
    spark = build_session(settings, app_name=f"tideline-{name}")
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
    finally:
        close = getattr(sink, "close", None)
        if close:
            close()
    if not query.isActive:
        failure = query.exception()
        listener.write_final(None if failure is None else str(failure))
    if query.exception() is not None and not stopping.is_set():
        raise RuntimeError(f"job {name} failed: {query.exception()}")
