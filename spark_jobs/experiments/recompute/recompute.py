"""Daily batch recomputation of experiment metrics from the raw tables (`tideline recompute`).

The seed's validation workflow "performs the same computation as the streaming jobs, but in
an ad-hoc way". Top to bottom:
1. the periods with windows on the day, from the ramps table (core.periods);
2. in the JVM, without the records experiment_metrics dead-lettered (recompute/dead_records.py,
   CONTRACTS §9): de-duplicated events, first triggers, the join and per-window deltas
   (recompute/deltas.py), from every raw record up to the day's end, because every count is
   cumulative from its period start;
3. per (experiment, group, period), in pandas: the cumulative, contiguous window rows
   (core.batch_metrics, the same numerator/denominator computer as the streaming job);
4. upsert into `batch_experiment_metrics` by the streaming table's primary key, so a rerun
   of a day replaces its rows instead of adding to them.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable

import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from spark_jobs.config.steps import step
from spark_jobs.contracts.tables import (
    BATCH_EXPERIMENT_METRICS,
    TABLE_BATCH_METRICS,
    TABLE_DEAD_LETTERS,
    TABLE_RAW_ACTIVATIONS,
    TABLE_RAW_EVENTS,
)
from spark_jobs.experiments.admin.metadata import read_ramps
from spark_jobs.experiments.core.batch_metrics import (
    periods_with_windows_in,
    window_rows_between,
)
from spark_jobs.experiments.core.metrics import COUNT_COLUMNS, COVARIATE_COLUMNS
from spark_jobs.experiments.core.periods import periods
from spark_jobs.experiments.core.pre_exposure import pre_exposure_windows
from spark_jobs.experiments.core.user_metrics import Delta
from spark_jobs.experiments.recompute.dead_records import (
    DEAD_COLUMNS,
    METRICS_JOB,
    counted_activations,
    counted_events,
    lineage_dead_letters,
)
from spark_jobs.experiments.recompute.deltas import (
    GROUP_PERIOD,
    RAW_ACTIVATION_COLUMNS,
    RAW_EVENT_COLUMNS,
    periods_frame,
    window_deltas,
)
from spark_jobs.settings import ExperimentSettings, Settings
from spark_jobs.streaming.checkpoint import created_at_ms
from spark_jobs.streaming.days import day_bounds_ms
from spark_jobs.streaming.lake.delta import read_spark, replace_slice_once, transaction_version

APP_ID_PREFIX = "batch_recompute"
PRIMARY_KEY = BATCH_EXPERIMENT_METRICS.primary_key
METRICS_SCHEMA = BATCH_EXPERIMENT_METRICS.arrow_schema()
_ROW = BATCH_EXPERIMENT_METRICS.drop("updated_at")  # the driver stamps updated_at
ROW_COLUMNS = _ROW.column_names
ROW_DDL = _ROW.ddl()


def group_period_rows(
    experiments: ExperimentSettings, after_ms: int, until_ms: int, deltas: pd.DataFrame
) -> pd.DataFrame:
    """The deltas of one group period -> its rows in (after, until]."""
    items = [
        Delta(
            r.experiment_hash, r.experiment_group, int(r.period_start), bool(r.is_control),
            None if pd.isna(r.event_type) else r.event_type, int(r.window_end),
            int(r.triggered), tuple(int(getattr(r, column)) for column in COUNT_COLUMNS),
            tuple(int(getattr(r, column)) for column in COVARIATE_COLUMNS),
        )
        for r in deltas.itertuples(index=False)
    ]
    rows = window_rows_between(
        items, experiments.period_ms, experiments.window_ms,
        experiments.critical_event_types, after_ms, until_ms,
    )
    return pd.DataFrame(
        [[getattr(row, name) for name in ROW_COLUMNS] for row in rows],
        columns=list(ROW_COLUMNS),
    )


def rows_per_group_period(
    experiments: ExperimentSettings, after_ms: int, until_ms: int
) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """The applyInPandas body (a plain function, so Spark sees a grouped-map UDF)."""

    def rows(deltas: pd.DataFrame) -> pd.DataFrame:
        return group_period_rows(experiments, after_ms, until_ms, deltas)

    return rows


def metric_rows(spark: SparkSession, settings: Settings, day: datetime.date) -> DataFrame | None:
    """The plan for the day's rows, or None when no period has a window on that day."""
    experiments = settings.experiments
    after_ms, until_ms = day_bounds_ms(day)
    chosen = periods_with_windows_in(
        periods(read_ramps(settings.metadata.url), experiments.period_ms),
        experiments.period_ms, experiments.window_ms, after_ms, until_ms,
    )
    if not chosen:
        return None
    dead = lineage_dead_letters(
        read_spark(spark, settings.lake.table(TABLE_DEAD_LETTERS), DEAD_COLUMNS.spark_schema()),
        created_at_ms(settings.lake.checkpoint(METRICS_JOB)),
    )
    deltas = window_deltas(
        counted_events(
            read_spark(spark, settings.lake.table(TABLE_RAW_EVENTS), RAW_EVENT_COLUMNS), dead),
        counted_activations(
            read_spark(spark, settings.lake.table(TABLE_RAW_ACTIVATIONS), RAW_ACTIVATION_COLUMNS),
            dead),
        periods_frame(spark, chosen),
        experiments.window_ms,
        since_ms=min(p.start for p in chosen),
        until_ms=until_ms,
        pre_windows=pre_exposure_windows(experiments.pre_exposure_ms, experiments.window_ms),
    )
    return deltas.groupBy(*GROUP_PERIOD).applyInPandas(
        rows_per_group_period(experiments, after_ms, until_ms), ROW_DDL
    )


def _as_metrics_table(rows: pa.Table | None) -> pa.Table:
    """Spark's Arrow rows (or none) in the exact schema of experiment_metrics."""
    if rows is None or rows.num_rows == 0:
        return METRICS_SCHEMA.empty_table()
    now = datetime.datetime.now(datetime.UTC)
    stamp = pa.array([now] * rows.num_rows, METRICS_SCHEMA.field("updated_at").type)
    return rows.select(list(ROW_COLUMNS)).append_column("updated_at", stamp).cast(METRICS_SCHEMA)


def recompute_day(spark: SparkSession, settings: Settings, day: datetime.date) -> int:
    """Recompute every window ending in (day 00:00, day+1 00:00] UTC; returns rows upserted.

    Each run of a day commits under its own Delta app id with the next batch number, so the
    log records how often a day was recomputed. The day's slice is replaced in one commit, so
    rows of a period that a ramps correction removed do not linger.
    """
    step("planning (ramps, dead letters)")
    plan = metric_rows(spark, settings, day)
    step("computing the windows")
    table = _as_metrics_table(None if plan is None else plan.toArrow())
    step(f"writing {TABLE_BATCH_METRICS}")
    uri = settings.lake.table(TABLE_BATCH_METRICS)
    app_id = f"{APP_ID_PREFIX}@{day.isoformat()}"
    previous = transaction_version(uri, app_id)
    batch = 0 if previous is None else previous + 1
    replace_slice_once(uri, table, PRIMARY_KEY, "window_end", day_bounds_ms(day), app_id, batch)
    return table.num_rows
