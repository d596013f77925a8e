"""The engine's own limits beside the experiment pipeline, on the same input (issue 15).

A job's throughput means little alone: these are what Spark does on this machine with the
same messages and no Python state, so a job can be reported as a ratio to them.
1. The source alone: every input topic through Tideline's Kafka source (JSON decoded and
   gated in the source, as the jobs read it) into Spark's `noop` sink, available-now.
2. JVM-only stateful work on the same records pre-parsed (read once, written to Parquet
   files in event-time order, one file per `limit` rows, replayed by Spark's file source one
   file per micro-batch, as the jobs take `limit` records per batch):
   - aggregation: de-duplication within the watermark and counts per user, event type and
     window (the per-user part of experiment_metrics);
   - join: those events joined with activations per user (an event counts for an
     experiment group when its time is inside the group's period after the activation),
     then counts and approximate distinct users per group, event type and window.
   Spark SQL cannot express the metrics exactly (first trigger per period, cumulative
   windows, re-ramp resets); these are the same shapes of work, which bound what any
   stateful step in Spark reaches here.

Used by `bench.pipeline_throughput --limits` (same run, same topics). For training_samples
(`samples_limits`, used by `bench.samples_throughput --engine-limits`): the source alone on
views and engagements, and in the JVM on the same records pre-parsed: views de-duplicated by
view_id within the watermark, left-outer joined with the engagements of the same view_id
within `samples.window` after the view: a row per (view, engagement) and one per view without
any (the job's join, without its exact per-signal labels and out-of-order rules).
"""

from __future__ import annotations

import tempfile
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_jobs.contracts.topics import TOPIC_ACTIVATIONS, TOPIC_EVENTS
from spark_jobs.settings import Settings
from spark_jobs.streaming.kafka.source import read_topic, read_topic_batch

EVENT_COLUMNS = ("user_id", "event_type", "ts")
ACTIVATION_COLUMNS = ("user_id", "experiment_hash", "experiment_group", "ts")


def _run_available_now(df: DataFrame, checkpoint: Path) -> dict[str, Any]:
    """Run `df` into the noop sink until its input is read; rows, seconds and rows/s."""
    started = time.monotonic()
    query = (df.writeStream.format("noop").outputMode("append")
             .option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    seconds = time.monotonic() - started
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    batches = sum(1 for p in query.recentProgress if p["numInputRows"] > 0)
    return {"rows": rows, "batches": batches, "seconds": round(seconds, 2),
            "rows_per_s": round(rows / seconds) if seconds else 0}


def source_alone(spark: SparkSession, settings: Settings, work: Path) -> dict[str, Any]:
    """Both input topics through the Kafka source, nothing else."""
    df = read_topic(
        spark, settings.kafka, (TOPIC_EVENTS, TOPIC_ACTIVATIONS),
        record=("events", "experiment_activations"),
        max_records_per_trigger=settings.jobs.max_records_per_trigger,
        max_message_bytes=settings.jobs.max_message_bytes,
    )
    return _run_available_now(df, work / "source_checkpoint")


def preparse(spark: SparkSession, settings: Settings, topic: str, record: str,
             columns: tuple[str, ...], folder: Path, rows_per_file: int) -> int:
    """The topic's decodable records as Parquet files in event-time order; their count."""
    parsed = (read_topic_batch(spark, settings.kafka, topic, record=record)
              .where(F.col("error").isNull()).select(*columns).cache())
    total = preparse_files(spark, parsed, folder, rows_per_file)
    parsed.unpersist()
    return total


def _replay(spark: SparkSession, folder: Path, columns: tuple[str, ...], schema: str,
            lateness_ms: int) -> DataFrame:
    return (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
            .parquet(str(folder)).select(*columns)
            .withColumn("t", F.timestamp_millis("ts"))
            .withWatermark("t", f"{lateness_ms} milliseconds"))


def jvm_limits(spark: SparkSession, settings: Settings, work: Path) -> dict[str, Any]:
    """The aggregation and the join in the JVM on the pre-parsed records."""
    experiments = settings.experiments
    limit = settings.jobs.max_records_per_trigger
    events_dir, activations_dir = work / "events", work / "activations"
    n_events = preparse(spark, settings, TOPIC_EVENTS, "events", EVENT_COLUMNS, events_dir,
                        limit)
    n_activations = preparse(spark, settings, TOPIC_ACTIVATIONS, "experiment_activations",
                             ACTIVATION_COLUMNS, activations_dir, limit)
    window = f"{experiments.window_ms} milliseconds"
    period = f"{experiments.period_ms} milliseconds"

    def events() -> DataFrame:
        return _replay(spark, events_dir, EVENT_COLUMNS,
                       "user_id long, event_type string, ts long", experiments.lateness_ms
                       ).dropDuplicatesWithinWatermark(["user_id", "event_type", "ts"])

    aggregation = events().groupBy("user_id", "event_type", F.window("t", window)).count()
    activations = _replay(spark, activations_dir, ACTIVATION_COLUMNS,
                          "user_id long, experiment_hash string, experiment_group string, "
                          "ts long", experiments.lateness_ms)
    e, a = events().alias("e"), activations.alias("a")
    joined = e.join(a, F.expr(
        f"e.user_id = a.user_id AND e.t >= a.t AND e.t < a.t + INTERVAL {experiments.period_ms}"
        " MILLISECONDS"))
    per_group = joined.groupBy(
        "a.experiment_hash", "a.experiment_group", "e.event_type", F.window("e.t", window)
    ).agg(F.count("*").alias("events"), F.approx_count_distinct("e.user_id").alias("users"))
    return {
        "preparsed": {"events": n_events, "activations": n_activations,
                      "rows_per_file": limit, "period": period},
        "aggregation": _run_available_now(aggregation, work / "aggregation_checkpoint"),
        "join": _run_available_now(per_group, work / "join_checkpoint"),
    }


def preparse_json(spark: SparkSession, settings: Settings, topic: str,
                  fields: dict[str, str], folder: Path, rows_per_file: int) -> int:
    """Like `preparse`, with the fields taken out of the JSON by the JVM (the topic's raw
    values, as training_samples reads them)."""
    text = F.col("value").cast("string")
    parsed = read_topic_batch(spark, settings.kafka, topic).select(*(
        F.get_json_object(text, f"$.{name}").try_cast(kind).alias(name)
        for name, kind in fields.items())).where(F.col("ts").isNotNull())
    staged = folder.with_name(f"{folder.name}-staged")
    parsed.write.parquet(str(staged))
    return preparse_files(spark, spark.read.parquet(str(staged)), folder, rows_per_file)


def preparse_files(spark: SparkSession, parsed: DataFrame, folder: Path,
                   rows_per_file: int) -> int:
    """`parsed` as Parquet files in event-time order, `rows_per_file` each; their count."""
    total = parsed.count()
    files = max(1, -(-total // rows_per_file))
    first, last = parsed.agg(F.min("ts"), F.max("ts")).first()
    step = (last - first + 1) / files
    edges = [None, *(first + round(i * step) for i in range(1, files)), None]
    for low, high in pairwise(edges):
        part = parsed
        if low is not None:
            part = part.where(F.col("ts") >= F.lit(int(low)))
        if high is not None:
            part = part.where(F.col("ts") < F.lit(int(high)))
        part.coalesce(1).write.mode("append").parquet(str(folder))
        time.sleep(0.01)
    return total


VIEW_FIELDS = {"view_id": "string", "user_id": "long", "post_id": "long", "ts": "long"}
ENGAGEMENT_FIELDS = {"view_id": "string", "user_id": "long", "signal": "string", "ts": "long"}


def samples_limits(settings: Settings) -> dict[str, Any]:
    """The source alone and the JVM's de-dup + join on training_samples' topics."""
    from spark_jobs.contracts.topics import TOPIC_ENGAGEMENTS, TOPIC_VIEWS
    from spark_jobs.streaming.spark_session import build_session

    samples, limit = settings.samples, settings.jobs.max_records_per_trigger
    spark = build_session(settings, app_name="tideline-bench-samples-limits")
    try:
        with tempfile.TemporaryDirectory(prefix="tideline-limits-") as folder:
            work = Path(folder)
            source = _run_available_now(read_topic(
                spark, settings.kafka, (TOPIC_VIEWS, TOPIC_ENGAGEMENTS),
                max_records_per_trigger=limit), work / "source_checkpoint")
            counts = {name: preparse_json(spark, settings, topic, fields, work / name, limit)
                      for name, topic, fields in (("views", TOPIC_VIEWS, VIEW_FIELDS),
                                                  ("engagements", TOPIC_ENGAGEMENTS,
                                                   ENGAGEMENT_FIELDS))}

            def replay(name: str, fields: dict[str, str]) -> DataFrame:
                schema = ", ".join(f"{k} {v}" for k, v in fields.items())
                return _replay(spark, work / name, tuple(fields), schema, samples.lateness_ms)

            views = replay("views", VIEW_FIELDS).dropDuplicatesWithinWatermark(["view_id"])
            engagements = replay("engagements", ENGAGEMENT_FIELDS)
            v, e = views.alias("v"), engagements.alias("e")
            joined = v.join(e, F.expr(
                f"v.view_id = e.view_id AND e.t >= v.t AND e.t <= v.t + INTERVAL "
                f"{samples.window_ms} MILLISECONDS"), "leftOuter")
            return {"source_alone": source, "preparsed": counts,
                    "join": _run_available_now(joined, work / "join_checkpoint")}
    finally:
        spark.stop()


def experiment_limits(settings: Settings) -> dict[str, Any]:
    """Source alone and JVM-only stateful work, in a fresh session on the loaded topics."""
    from spark_jobs.streaming.spark_session import build_session

    spark = build_session(settings, app_name="tideline-bench-limits")
    try:
        with tempfile.TemporaryDirectory(prefix="tideline-limits-") as folder:
            work = Path(folder)
            return {"source_alone": source_alone(spark, settings, work),
                    **jvm_limits(spark, settings, work)}
    finally:
        spark.stop()
