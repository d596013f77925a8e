"""filter_activations: activations -> only those inside a period of the newest ramp snapshot.

The seed's broadcast-state job: the snapshot CSV (published every 5 minutes) is re-read at
most every `jobs.snapshot_refresh` and broadcast-joined with each micro-batch in the JVM.
Kept activations get `group_ramp_time` (their period's start) and `is_control`, go to the
`filtered_experiment_activations` topic and to `raw_activations`; the others are dead letters
(malformed, future) or counted as outside_period (activation_batch.py).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from spark_jobs.contracts.tables import RAW_ACTIVATIONS, TABLE_RAW_ACTIVATIONS
from spark_jobs.contracts.topics import TOPIC_ACTIVATIONS, TOPIC_FILTERED_ACTIVATIONS
from spark_jobs.experiments.admin.snapshot import SnapshotWatcher, read_snapshot
from spark_jobs.experiments.admin.snapshot_alerts import StaleSnapshotAlarm
from spark_jobs.experiments.jobs.activation_batch import filter_batch, future_details
from spark_jobs.experiments.jobs.filter_sink import FilterSink
from spark_jobs.settings import Settings
from spark_jobs.streaming.kafka.source import read_topic
from spark_jobs.streaming.worker_warmup import ARROW

NAME = "filter_activations"
FILTERED_FIELDS = (
    "user_id", "experiment_hash", "experiment_group", "ts", "group_ramp_time", "is_control",
)
RAW_ACTIVATION_SCHEMA = RAW_ACTIVATIONS.arrow_schema()
SNAPSHOT_SCHEMA = StructType(
    [
        StructField("s_experiment_hash", StringType(), False),
        StructField("s_experiment_group", StringType(), False),
        StructField("s_start", LongType(), False),
        StructField("s_allocation_pct", DoubleType(), False),
        StructField("s_is_control", BooleanType(), False),
    ]
)


def build(spark: SparkSession, settings: Settings) -> DataFrame:
    """The streaming plan is only the source; the snapshot join happens per micro-batch."""
    return read_topic(
        spark, settings.kafka, TOPIC_ACTIVATIONS, record="experiment_activations",
        max_records_per_trigger=settings.jobs.max_records_per_trigger,
        max_message_bytes=settings.jobs.max_message_bytes,
    )


class SnapshotFrame:
    """The newest snapshot as a small Spark DataFrame, rebuilt only when a new file appears."""

    def __init__(self, spark: SparkSession, settings: Settings) -> None:
        self.spark = spark
        self.watcher = SnapshotWatcher(
            settings.lake.snapshots, settings.jobs.snapshot_refresh_ms,
            settings.experiments.period_ms,
        )
        self._path: Path | None = None
        self._frame = spark.createDataFrame([], SNAPSHOT_SCHEMA)
        self.stale = StaleSnapshotAlarm(settings, NAME)

    def current(self) -> DataFrame:
        self.watcher.current()
        self.stale.check(self.watcher.path)
        if self.watcher.path != self._path and self.watcher.path is not None:
            rows = [
                (r.experiment_hash, r.experiment_group, r.group_ramp_time,
                 float(r.allocation_pct), r.is_control)
                for r in read_snapshot(self.watcher.path)
            ]
            self._frame.unpersist()
            self._frame = self.spark.createDataFrame(rows, SNAPSHOT_SCHEMA).cache()
            self._path = self.watcher.path
        return self._frame


class FilteredActivationsSink(FilterSink):
    """foreachBatch: join with the snapshot, publish, dead letters, then raw_activations."""

    marker = TABLE_RAW_ACTIVATIONS
    topic = TOPIC_FILTERED_ACTIVATIONS
    fields = FILTERED_FIELDS
    raw_schema = RAW_ACTIVATION_SCHEMA

    def __init__(self, spark: SparkSession, settings: Settings) -> None:
        super().__init__(settings, NAME)
        self.snapshot = SnapshotFrame(spark, settings)
        self.period_ms = settings.experiments.period_ms

    def collect(self, batch: DataFrame) -> pa.Table:
        """The batch joined with the newest snapshot: kept activations ("ok"), undecodable
        and future ones ("dead"), and a count of those outside every period (see
        activation_batch)."""
        snapshot = F.broadcast(self.snapshot.current())
        plan = filter_batch(batch, snapshot, self.period_ms, self.settings.jobs.max_clock_skew_ms)
        return future_details(plan.toArrow())


def python_daemons(settings: Settings) -> tuple[str, ...]:
    """Its source runs in Python workers (streaming/worker_warmup.py)."""
    return (ARROW,)


def sink(spark: SparkSession, settings: Settings) -> FilteredActivationsSink:
    return FilteredActivationsSink(spark, settings)
