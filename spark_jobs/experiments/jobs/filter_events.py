"""filter_events: raw events -> critical types only -> per-user hourly cap -> filtered_events.

Reads like the seed's "Filter Events Job": keep the business-critical event types, strip
the fields nobody downstream needs, cap spammers per user and event-time hour, publish to
the lightweight `filtered_events` topic and record what was accepted in `raw_events` for the
daily batch recomputation. Undecodable, late and future records go to `dead_letters`;
non-critical and capped events are counted by reason in the progress report.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_jobs.contracts.reasons import NON_CRITICAL_TYPE
from spark_jobs.contracts.tables import RAW_EVENTS, TABLE_RAW_EVENTS
from spark_jobs.contracts.topics import TOPIC_EVENTS, TOPIC_FILTERED_EVENTS
from spark_jobs.experiments.jobs.filter_sink import FilterSink
from spark_jobs.experiments.processors.cap_processor import INPUT_FIELDS, HourlyCapProcessor
from spark_jobs.settings import Settings
from spark_jobs.streaming.drops import OBSERVED
from spark_jobs.streaming.event_time import FUTURE_COLUMN, future_by_ms, with_event_time
from spark_jobs.streaming.kafka.source import read_topic
from spark_jobs.streaming.worker_warmup import ARROW

NAME = "filter_events"
FILTERED_FIELDS = ("user_id", "event_type", "ts")
RAW_EVENT_SCHEMA = RAW_EVENTS.arrow_schema()


def build(spark: SparkSession, settings: Settings) -> DataFrame:
    """The streaming plan: source, critical-type filter, capping (users in buckets, stateful,
    routes late rows)."""
    experiments = settings.experiments
    events = read_topic(
        spark, settings.kafka, TOPIC_EVENTS, record="events",
        max_records_per_trigger=settings.jobs.max_records_per_trigger,
        max_message_bytes=settings.jobs.max_message_bytes,
    )
    is_critical = F.col("event_type").isin(*experiments.critical_event_types)
    # a record from the future is a `future` dead letter whatever its type (CONTRACTS 9)
    ahead = future_by_ms(F.col("ts"), F.col("kafka_timestamp"), settings.jobs.max_clock_skew_ms)
    non_critical = F.col("error").isNull() & ~is_critical & ahead.isNull()
    counted = events.observe(  # the filter's drops reach the progress report (drops.py)
        OBSERVED, F.coalesce(F.sum(F.when(non_critical, 1)), F.lit(0)).alias(NON_CRITICAL_TYPE))
    critical = counted.where(~non_critical)
    timed = with_event_time(critical, "ts", experiments.lateness_ms,
                            max_clock_skew_ms=settings.jobs.max_clock_skew_ms)
    return HourlyCapProcessor(experiments.cap_per_user_hour).apply(
        timed.select(*INPUT_FIELDS, FUTURE_COLUMN), settings.jobs.state_buckets)


class FilteredEventsSink(FilterSink):
    """foreachBatch: publish accepted events, then dead letters, then raw_events (the marker)."""

    marker = TABLE_RAW_EVENTS
    topic = TOPIC_FILTERED_EVENTS
    fields = FILTERED_FIELDS
    raw_schema = RAW_EVENT_SCHEMA

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings, NAME)


def python_daemons(settings: Settings) -> tuple[str, ...]:
    """Its source and its capping run in Python workers (streaming/worker_warmup.py)."""
    return (ARROW,)


def sink(spark: SparkSession, settings: Settings) -> FilteredEventsSink:
    return FilteredEventsSink(settings)
