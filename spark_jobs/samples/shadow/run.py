"""The daily shadow validation of training_samples: recompute a day in batch, compare, store,
alert (the seed's separate pipeline that checked the migrated joiner).

The batch side reads the day's views (from one samples.dedup_ttl earlier, for the first
arrivals of re-sent view_ids) and engagements (up to one window later) straight from the
topics, bounded by Kafka time with generous margins, and recomputes the samples with an
independent Spark SQL implementation (`recompute.py`). Only samples whose view ts lies in the
day are compared, so a view whose window was still open elsewhere does not count. The result
goes to `validation_results` (case `training_samples`: one row for the match rate, one for the
schema) and an alert fires when the match rate is below `samples.min_match_rate` or the
schemas disagree.

Like every batch recomputation (CONTRACTS section 9), it leaves out exactly the records the job
routed to `dead_letters` (malformed, late, future, ...): equality then holds on hostile
traffic too.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_jobs.config.steps import step
from spark_jobs.contracts.tables import (
    DEAD_LETTERS,
    TABLE_DEAD_LETTERS,
    TABLE_TRAINING_SAMPLES,
    training_samples,
)
from spark_jobs.contracts.topics import TOPIC_ENGAGEMENTS, TOPIC_VIEWS
from spark_jobs.control.alerts import Alert, send_alert
from spark_jobs.control.validation_results import CheckOutcome, store_results
from spark_jobs.samples.shadow.compare import ShadowReport, compare_samples
from spark_jobs.samples.shadow.recompute import recompute_samples
from spark_jobs.settings import Settings
from spark_jobs.streaming.checkpoint import committed_watermark_ms
from spark_jobs.streaming.days import day_bounds_ms, iso_ms
from spark_jobs.streaming.kafka.source import read_topic_batch
from spark_jobs.streaming.kafka.source_schema import RAW_SCHEMA
from spark_jobs.streaming.kafka.topic_admin import TopicNotFoundError, partitions_of
from spark_jobs.streaming.lake.delta import read_arrow, read_spark, table_exists

CASE = "training_samples"
CHECK_MATCH = "sample_match_rate"
CHECK_SCHEMA = "sample_schema"
ALERT_SOURCE = "training_samples_shadow"
JOB = "training_samples"
ARRIVAL_MARGIN_MS = 3_600_000  # Kafka time may trail event time (client clocks, retries)


class ShadowFailed(RuntimeError):
    """The streaming samples of a day disagree with the batch recomputation."""

    def __init__(self, message: str, report: ShadowReport) -> None:
        super().__init__(message)
        self.report = report


def day_closed(settings: Settings, day: datetime.date) -> tuple[bool, str]:
    """(ready, why): every view of the day has had its sample emitted once the job's
    committed watermark reached the day's end plus the attribution window. A job that never
    ran has nothing pending: the comparison then shows whether the topics held views."""
    _, until_ms = day_bounds_ms(day)
    needed = until_ms + settings.samples.window_ms
    if not _has_checkpoint(settings):
        return True, f"{JOB} has never run: comparing with what the topics hold"
    watermark = committed_watermark_ms(settings.lake.checkpoint(JOB))
    if watermark is not None and watermark >= needed:
        return True, f"{JOB} watermark {iso_ms(watermark)} is past {iso_ms(needed)}"
    return False, f"{JOB} watermark {iso_ms(watermark)} has not reached {iso_ms(needed)}"


def _has_checkpoint(settings: Settings) -> bool:
    location = settings.lake.checkpoint(JOB)
    return "://" in location or (Path(location) / "metadata").exists()


def batch_samples(spark: SparkSession, settings: Settings, day: datetime.date) -> pa.Table:
    """The day's samples as the batch recomputation builds them."""
    start, until = day_bounds_ms(day)
    window, lateness = settings.samples.window_ms, settings.samples.lateness_ms
    ttl = settings.samples.dedup_ttl_ms
    margin = lateness + ARRIVAL_MARGIN_MS
    # views from one TTL earlier: a view of the day may be a re-sent id whose first arrival
    # is older (the day's samples are those whose first arrival is in the day)
    views = _read(spark, settings, TOPIC_VIEWS, start - ttl - margin, until + margin)
    engagements = _read(spark, settings, TOPIC_ENGAGEMENTS, start - margin,
                        until + window + margin)
    samples = recompute_samples(views, engagements, window, settings.samples.signals, ttl)
    return samples.where((F.col("ts") >= start) & (F.col("ts") < until)).toArrow()


def _read(spark: SparkSession, settings: Settings, topic: str, start_ms: int, end_ms: int
          ) -> DataFrame:
    """The topic's records in the Kafka-time range but those the job dead-lettered; none
    when the topic does not exist yet (the job never ran: nothing to compare, not an error)."""
    try:
        partitions_of(settings.kafka, topic)
    except TopicNotFoundError:
        return spark.createDataFrame([], RAW_SCHEMA)
    records = read_topic_batch(spark, settings.kafka, topic, start_ms=start_ms, end_ms=end_ms)
    dead = read_spark(spark, settings.lake.table(TABLE_DEAD_LETTERS),
                      DEAD_LETTERS.spark_schema())
    left_out = dead.where((F.col("job") == JOB) & (F.col("topic") == topic)).select(
        F.col("partition").alias("kafka_partition"), F.col("offset").alias("kafka_offset"))
    return records.join(left_out, ["kafka_partition", "kafka_offset"], "left_anti")


def streaming_samples(settings: Settings, day: datetime.date) -> pa.Table:
    """The day's rows of the `training_samples` table (its own schema, for the schema check)."""
    start, until = day_bounds_ms(day)
    uri = settings.lake.table(TABLE_TRAINING_SAMPLES)
    if not table_exists(uri):
        return training_samples(settings.samples.signals).arrow_schema().empty_table()
    return read_arrow(uri, filters=[("ts", ">=", start), ("ts", "<", until)])


def compare_day(spark: SparkSession, settings: Settings, day: datetime.date) -> ShadowReport:
    batch = batch_samples(spark, settings, day)
    streaming = streaming_samples(settings, day)
    return compare_samples(streaming, batch, settings.samples.signals,
                           streaming_schema=streaming.schema, batch_schema=batch.schema)


def outcomes(report: ShadowReport, min_match_rate: float) -> list[CheckOutcome]:
    """The two stored checks: the match rate against its threshold, and schema agreement."""
    summary = {k: v for k, v in report.as_dict().items() if k not in ("examples", "schema")}
    worst = asdict(report.examples[0]) if report.examples else None
    unmatched = report.batch_samples - report.matched + report.extra_in_streaming
    match = CheckOutcome(
        check=CHECK_MATCH,
        success=report.match_rate >= min_match_rate and report.duplicates_in_streaming == 0,
        evaluated=report.batch_samples, unexpected=unmatched,
        max_drift=1.0 - report.match_rate,
        worst=None if worst is None else json.loads(json.dumps(worst, default=str)),
        details={**summary, "min_match_rate": min_match_rate},
    )
    schema = report.schema
    schema_check = CheckOutcome(
        check=CHECK_SCHEMA, success=schema.agrees, evaluated=1, unexpected=int(not schema.agrees),
        details={"problems": list(schema.problems)},
    )
    return [match, schema_check]


def failure_alert(settings: Settings, report: ShadowReport, day: datetime.date,
                  run_url: str | None) -> Alert:
    """What failed (match rate, schema), for which day, by how much, with examples."""
    problems = list(report.schema.problems)
    summary = (
        f"training samples of {day.isoformat()}: streaming matches the batch recomputation "
        f"for {report.match_rate:.3%} of {report.batch_samples} samples (minimum "
        f"{settings.samples.min_match_rate:.3%}); {report.missing_in_streaming} missing, "
        f"{report.extra_in_streaming} extra, {report.differing} differing"
        + (f"; schema: {'; '.join(problems)}" if problems else "")
    )
    return Alert(
        source=ALERT_SOURCE, kind="sample_shadow_failed", summary=summary,
        metric="match_rate", observed=report.match_rate,
        threshold=settings.samples.min_match_rate, run_url=run_url,
        details={"day": day.isoformat(), "field_differences": report.field_differences,
                 "examples": [json.loads(json.dumps(asdict(e), default=str))
                              for e in report.examples[:5]]},
    )


def shadow_day(spark: SparkSession, settings: Settings, day: datetime.date, run_id: str,
               run_url: str | None = None) -> dict[str, Any]:
    """Compare, store both checks, alert on failure; ShadowFailed when a check failed."""
    step("recomputing from the topics and comparing")
    report = compare_day(spark, settings, day)
    checks = outcomes(report, settings.samples.min_match_rate)
    step("storing the checks")
    store_results(settings, checks, run_id, day, CASE, run_url)
    summary = {"day": day.isoformat(), "match_rate": report.match_rate,
               "batch_samples": report.batch_samples,
               "streaming_samples": report.streaming_samples,
               "checks": {c.check: c.success for c in checks}}
    if not all(c.success for c in checks):
        send_alert(settings, failure_alert(settings, report, day, run_url))
        raise ShadowFailed(f"shadow validation of {day.isoformat()} failed: {summary}", report)
    return summary
