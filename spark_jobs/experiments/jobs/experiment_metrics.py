"""experiment_metrics: filtered events + filtered activations -> cumulative metrics per window.

The seed's aggregation job, top to bottom:
1. read both filtered topics through one source: one offset plan aligned on event time,
   so both advance together and one watermark serves both (also after a restart);
2. one stateful step per user (users kept in buckets, streaming/bucketed) does what the
   seed spread over four keyed functions: de-duplicate events, find first trigger times,
   join activations with events (events wait until their window closes, so an activation
   arriving after its events still counts), per-user counts; it emits per-window deltas
   of each metric (core/metrics.py) once windows close;
3. the driver folds the deltas into cumulative, contiguous window rows (numerator and
   denominator computers) and upserts them into `experiment_metrics` exactly once;
4. the users' provisional deltas (every accepted record, windows still open included) are
   folded into live totals per group period (core/provisional.py) and upserted into
   `experiment_metrics_provisional` first, exactly once as well: a batch that table already
   holds (a crash before the marker's commit) is not folded again when replayed.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_jobs.contracts.tables import (
    EXPERIMENT_METRICS,
    TABLE_EXPERIMENT_METRICS,
    TABLE_PROVISIONAL_METRICS,
)
from spark_jobs.contracts.topics import TOPIC_FILTERED_ACTIVATIONS, TOPIC_FILTERED_EVENTS
from spark_jobs.experiments.core.group_windows import GroupWindows, MetricRow
from spark_jobs.experiments.core.metrics import COUNT_COLUMNS, COVARIATE_COLUMNS
from spark_jobs.experiments.core.pre_exposure import pre_exposure_windows
from spark_jobs.experiments.core.user_metrics import Delta, MetricParams
from spark_jobs.experiments.jobs.lineage import COMMIT_APP, COMMIT_STAMP, lineage_info
from spark_jobs.experiments.jobs.provisional_table import LiveTable
from spark_jobs.experiments.processors.metrics_processor import (
    INPUT_FIELDS,
    SOURCE_ACTIVATION,
    SOURCE_EVENT,
    UserMetricsProcessor,
)
from spark_jobs.settings import Settings
from spark_jobs.streaming.batch_outputs import BatchSink, rows_of_kind
from spark_jobs.streaming.checkpoint import batch_watermark_ms
from spark_jobs.streaming.event_time import FUTURE_COLUMN, with_event_time
from spark_jobs.streaming.kafka.source import read_topic
from spark_jobs.streaming.lake.delta import (
    columns_present,
    commit_metadata,
    load_table,
    merge_once,
    read_arrow,
    transaction_version,
)
from spark_jobs.streaming.worker_warmup import ARROW

NAME = "experiment_metrics"
PRIMARY_KEY = EXPERIMENT_METRICS.primary_key
METRICS_SCHEMA = EXPERIMENT_METRICS.arrow_schema()
_INPUT_COLUMNS = (*INPUT_FIELDS, FUTURE_COLUMN)


def _as_input(df: DataFrame) -> DataFrame:
    """Both topics in one row shape, tagged with their `source`."""
    source = F.when(F.col("kafka_topic") == TOPIC_FILTERED_EVENTS, F.lit(SOURCE_EVENT)).otherwise(
        F.lit(SOURCE_ACTIVATION)
    )
    return df.withColumn("source", source).select(*_INPUT_COLUMNS)


def metric_params(settings: Settings) -> MetricParams:
    experiments = settings.experiments
    return MetricParams(
        experiments.period_ms, experiments.window_ms, experiments.dedup_ttl_ms,
        pre_exposure_windows(experiments.pre_exposure_ms, experiments.window_ms),
    )


def build(spark: SparkSession, settings: Settings) -> DataFrame:
    """The streaming plan: both topics through one source (one offset plan, so event time
    advances together and one watermark suffices), then one stateful step per user."""
    both = read_topic(
        spark, settings.kafka, (TOPIC_FILTERED_EVENTS, TOPIC_FILTERED_ACTIVATIONS),
        record=("filtered_events", "filtered_experiment_activations"),
        max_records_per_trigger=settings.jobs.max_records_per_trigger,
        max_message_bytes=settings.jobs.max_message_bytes,
        idle_timeout_ms=settings.jobs.idle_timeout_ms, available_now_in_one_plan=True,
    )
    both = _as_input(with_event_time(both, "ts", settings.experiments.lateness_ms,
                                     max_clock_skew_ms=settings.jobs.max_clock_skew_ms))
    return UserMetricsProcessor(metric_params(settings)).apply(
        both, settings.jobs.state_buckets)


def deltas_of(table: pa.Table, kind: str = "delta") -> list[Delta]:
    """Sum the per-user deltas of a batch by (group period, event type, window); `kind`
    "provisional": the provisional ones (window_end null)."""
    deltas = rows_of_kind(table, kind)
    if deltas.num_rows == 0:
        return []
    keys = ["experiment_hash", "experiment_group", "period_start", "is_control",
            "event_type", "window_end"]
    summed = deltas.group_by(keys, use_threads=False).aggregate(
        [(column, "sum") for column in ("triggered", *COUNT_COLUMNS, *COVARIATE_COLUMNS)]
    )
    return [
        Delta(
            r["experiment_hash"], r["experiment_group"], r["period_start"], r["is_control"],
            r["event_type"], r["window_end"], r["triggered_sum"],
            tuple(r[f"{column}_sum"] for column in COUNT_COLUMNS),
            tuple(r[f"{column}_sum"] for column in COVARIATE_COLUMNS),
        )
        for r in summed.to_pylist()
    ]


def metrics_table(rows: list[MetricRow], updated_at: datetime) -> pa.Table:
    columns = {name: [getattr(r, name) for r in rows] for name in METRICS_SCHEMA.names[:-1]}
    columns["updated_at"] = [updated_at] * len(rows)
    return pa.Table.from_pydict(columns, schema=METRICS_SCHEMA)


# Custom metadata of each metrics commit (jobs/lineage.py) and its newest window, so that a
# restart finds the rows its own checkpoint lineage wrote last.
COMMIT_WINDOW = "tideline.window_end"


def commit_info(app_id: str, rows: list[MetricRow], updated_at: datetime) -> dict[str, str]:
    return {**lineage_info(app_id, updated_at),
            COMMIT_WINDOW: str(max(r.window_end for r in rows))}


def _rows_at(table_uri: str, window_end: int) -> pa.Table:
    """The rows of one window end (a column an older release did not write is left out)."""
    columns = columns_present(load_table(table_uri), METRICS_SCHEMA.names)
    return read_arrow(table_uri, columns=columns, filters=[("window_end", "=", window_end)])


def _as_rows(table: pa.Table) -> list[MetricRow]:
    """Rows as the domain's MetricRow; a missing column reads as None (GroupWindows.resume
    takes it as 0)."""
    names = MetricRow.__dataclass_fields__
    return [MetricRow(**{name: row.get(name) for name in names})
            for row in table.drop_columns(["updated_at"]).to_pylist()]


def read_metric_rows(table_uri: str, app_id: str) -> list[MetricRow]:
    """The rows needed to resume the running totals after a restart: those the lineage's
    newest commit wrote at its newest window. Every batch that writes advances every open group
    to the same closed window, so those rows hold every open group's totals; older rows are
    history. Rows of another lineage (a checkpoint reset) may share that window_end, so the
    commit's stamp tells them apart. None for a lineage that never wrote."""
    info = commit_metadata(table_uri, COMMIT_APP, app_id)
    if info is not None:
        rows = _rows_at(table_uri, int(info[COMMIT_WINDOW]))
        stamps = rows["updated_at"].cast(pa.int64())
        return _as_rows(rows.filter(pc.equal(stamps, int(info[COMMIT_STAMP]))))
    if transaction_version(table_uri, app_id) is None:
        return []
    # written before commits carried metadata: the table's newest window (one lineage only)
    newest = pc.max(read_arrow(table_uri, columns=["window_end"])["window_end"]).as_py()
    return _as_rows(_rows_at(table_uri, newest))


class MetricsSink(BatchSink[pa.Table]):
    """foreachBatch: dead letters, live totals, then cumulative window rows, each table
    upserted once per batch."""

    marker = TABLE_EXPERIMENT_METRICS

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings, NAME)
        self.table_uri = settings.lake.table(TABLE_EXPERIMENT_METRICS)
        self.checkpoint = settings.lake.checkpoint(NAME)
        self.windows: GroupWindows | None = None
        self.live: LiveTable | None = None

    def _resume(self) -> GroupWindows:
        """Running totals from the rows this checkpoint lineage wrote; none for a new one
        (it rebuilds its windows from the topics, and the upsert overwrites older rows)."""
        experiments = self.settings.experiments
        return GroupWindows.resume(
            experiments.period_ms, experiments.window_ms, experiments.critical_event_types,
            read_metric_rows(self.table_uri, self.outputs.app_id),
        )

    def commit(self, table: pa.Table, batch_id: int) -> None:
        if self.windows is None:
            self.windows = self._resume()
        if self.live is None:
            self.live = LiveTable(self.settings.lake.table(TABLE_PROVISIONAL_METRICS),
                                  self.outputs.app_id, self.settings.experiments,
                                  self.settings.maintenance.log_retention_ms)
        watermark = batch_watermark_ms(self.checkpoint, batch_id)
        self.live.commit(deltas_of(table, "provisional"), watermark, batch_id)
        rows = self.windows.apply(deltas_of(table), watermark)
        if rows:
            now = datetime.now(UTC)
            merge_once(
                self.table_uri, metrics_table(rows, now), PRIMARY_KEY,
                self.outputs.app_id, batch_id, commit_info(self.outputs.app_id, rows, now),
                tables=self.outputs.tables,
            )


def python_daemons(settings: Settings) -> tuple[str, ...]:
    """Its source and its per-user step run in Python workers (streaming/worker_warmup.py)."""
    return (ARROW,)


def sink(spark: SparkSession, settings: Settings) -> MetricsSink:
    return MetricsSink(settings)
