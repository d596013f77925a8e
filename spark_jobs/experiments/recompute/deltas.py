"""The JVM half of the batch recomputation: raw tables -> per-window deltas of each group period.

Plain Spark SQL, no Python per row: de-duplication, first triggers, the activation-event
join and the per-user running counts are shuffles and window functions; each counted metric
(core/metrics.py) is its `per_user` function applied to Columns. The result has the shape of
the streaming job's deltas (one row per group period, event type and window; event_type null
for first triggers), so the pure `core.batch_metrics` turns it into cumulative rows exactly as
the streaming job does.

CUPED's sums (core/metrics.py COVARIATE_COLUMNS): each triggered user's pre-exposure volume x
per event type (core/pre_exposure.py: the whole windows before the window of the first
trigger) comes from the same clean events; x and x² grow in the trigger's window, x times a
crossed metric's growth wherever that metric grows.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from spark_jobs.contracts.tables import RAW_ACTIVATIONS, RAW_EVENTS
from spark_jobs.experiments.core.metrics import (
    COUNT_COLUMNS,
    COVARIATE_COLUMNS,
    CROSSED_METRICS,
    EVENT_METRICS,
    EventMetric,
)
from spark_jobs.experiments.core.periods import Period

GROUP_PERIOD = ("experiment_hash", "experiment_group", "period_start")
DELTA_COLUMNS = (
    *GROUP_PERIOD, "is_control", "event_type", "window_end", "triggered", *COUNT_COLUMNS,
    *COVARIATE_COLUMNS,
)


def _zero(name: str) -> Column:
    return F.lit(0).cast(LongType()).alias(name)
# Only the columns the recomputation reads; a missing table reads as empty with these.
RAW_EVENT_COLUMNS = RAW_EVENTS.select("user_id", "event_type", "ts").spark_schema()
RAW_ACTIVATION_COLUMNS = RAW_ACTIVATIONS.select(
    "user_id", "experiment_hash", "experiment_group", "group_ramp_time", "ts"
).spark_schema()
PERIOD_SCHEMA = StructType(
    [
        StructField("experiment_hash", StringType(), False),
        StructField("experiment_group", StringType(), False),
        StructField("period_start", LongType(), False),
        StructField("period_end", LongType(), False),
        StructField("is_control", BooleanType(), False),
    ]
)


def window_end_of(ts: Column, window_ms: int) -> Column:
    """core.windows.window_end as a Column: the multiple of `window` just above ts."""
    return (F.floor(ts / F.lit(window_ms)) + 1) * F.lit(window_ms)


def periods_frame(spark: SparkSession, periods: Sequence[Period]) -> DataFrame:
    """The periods to recompute as a small DataFrame (broadcast into the joins)."""
    rows = [
        (p.experiment_hash, p.experiment_group, p.start, p.end, p.is_control) for p in periods
    ]
    return spark.createDataFrame(rows, PERIOD_SCHEMA)


def clean_events(raw_events: DataFrame, since_ms: int, until_ms: int) -> DataFrame:
    """Events in [since, until), de-duplicated on (user_id, event_type, ts).

    raw_events holds what filter_events accepted (critical types, capped). Which copy of a
    duplicate is "first in offset order" cannot change a count: only the key columns are
    kept, and they are equal.
    """
    in_range = (F.col("ts") >= since_ms) & (F.col("ts") < until_ms)
    return (
        raw_events.where(in_range)
        .select("user_id", "event_type", "ts")
        .dropDuplicates(["user_id", "event_type", "ts"])
    )


def first_triggers(
    raw_activations: DataFrame, periods: DataFrame, since_ms: int, until_ms: int
) -> DataFrame:
    """first_trigger per (group period, user): the smallest activation ts inside the period.

    Periods come from the ramps table, not from the snapshot the streaming filter used, so a
    snapshot that missed a period shows up as drift instead of being copied.
    """
    in_range = (F.col("ts") >= since_ms) & (F.col("ts") < until_ms)
    activations = raw_activations.where(in_range).alias("a")
    inside = (
        (F.col("a.experiment_hash") == F.col("p.experiment_hash"))
        & (F.col("a.experiment_group") == F.col("p.experiment_group"))
        & (F.col("a.ts") >= F.col("p.period_start"))
        & (F.col("a.ts") < F.col("p.period_end"))
    )
    joined = activations.join(F.broadcast(periods.alias("p")), inside)
    return joined.groupBy(
        "p.experiment_hash", "p.experiment_group", "p.period_start", "p.period_end",
        "p.is_control", "a.user_id",
    ).agg(F.min("a.ts").alias("first_trigger"))


def trigger_deltas(triggers: DataFrame, window_ms: int) -> DataFrame:
    """Users whose first trigger falls in each window (triggered_users grows there)."""
    return (
        triggers.withColumn("window_end", window_end_of(F.col("first_trigger"), window_ms))
        .groupBy(*GROUP_PERIOD, "is_control", "window_end")
        .agg(F.count(F.lit(1)).alias("triggered"))
        .select(
            *GROUP_PERIOD, "is_control", F.lit(None).cast(StringType()).alias("event_type"),
            "window_end", "triggered",
            *(_zero(name) for name in (*COUNT_COLUMNS, *COVARIATE_COLUMNS)),
        )
    )


def pre_exposure(events: DataFrame, triggers: DataFrame, window_ms: int, windows: int
                 ) -> DataFrame:
    """x per (group period, user, event type): the user's clean events of the type in the
    `windows` whole windows before the window of their first trigger (types with none are
    absent)."""
    high = window_end_of(F.col("first_trigger"), window_ms) - F.lit(window_ms)
    low = high - F.lit(windows * window_ms)
    return (
        events.join(triggers.select(*GROUP_PERIOD, "user_id", "first_trigger"), "user_id")
        .where((F.col("ts") >= low) & (F.col("ts") < high))
        .groupBy(*GROUP_PERIOD, "user_id", "event_type")
        .agg(F.count(F.lit(1)).alias("pre"))
    )


def pre_exposure_deltas(pre: DataFrame, triggers: DataFrame, window_ms: int) -> DataFrame:
    """Σx and Σx² of each event type grow in the window of each user's first trigger."""
    x = F.col("pre")
    return (
        pre.join(triggers.select(*GROUP_PERIOD, "is_control", "user_id", "first_trigger"),
                 [*GROUP_PERIOD, "user_id"])
        .withColumn("window_end", window_end_of(F.col("first_trigger"), window_ms))
        .groupBy(*GROUP_PERIOD, "is_control", "event_type", "window_end")
        .agg(F.sum(x).alias(COVARIATE_COLUMNS[0]), F.sum(x * x).alias(COVARIATE_COLUMNS[1]))
        .select(
            *GROUP_PERIOD, "is_control", "event_type", "window_end", _zero("triggered"),
            *(_zero(name) for name in COUNT_COLUMNS), *COVARIATE_COLUMNS[:2],
            *(_zero(name) for name in COVARIATE_COLUMNS[2:]),
        )
    )


def window_growth(metric: EventMetric, n: Column, running: Column) -> Column:
    """What a user whose count went from running - n to running adds to the metric, as a long
    Column (a comparison becomes 0/1): the difference the streaming state takes too."""
    def of_count(count: Column) -> Column:
        return metric.per_user(count).cast(LongType())

    return of_count(running) - of_count(running - n)


def event_deltas(events: DataFrame, triggers: DataFrame, pre: DataFrame, window_ms: int
                 ) -> DataFrame:
    """How each counted metric, and x times each crossed one, grows in each window.

    An event counts for a group period when first_trigger <= ts < period end. Per user, event
    type and window: n counted events, and `running` events of the type since the period
    start; the metrics' window growths are summed over users.
    """
    counted = events.join(triggers, "user_id").where(
        (F.col("ts") >= F.col("first_trigger")) & (F.col("ts") < F.col("period_end"))
    )
    per_user = (
        counted.withColumn("window_end", window_end_of(F.col("ts"), window_ms))
        .groupBy(*GROUP_PERIOD, "is_control", "event_type", "user_id", "window_end")
        .agg(F.count(F.lit(1)).alias("n"))
    )
    history = Window.partitionBy(*GROUP_PERIOD, "event_type", "user_id").orderBy("window_end")
    running = F.sum("n").over(history.rowsBetween(Window.unboundedPreceding, Window.currentRow))
    growth = {metric.column: window_growth(metric, F.col("n"), F.col("running"))
              for metric in EVENT_METRICS}
    x = F.coalesce(F.col("pre"), F.lit(0).cast(LongType()))
    return (
        per_user.withColumn("running", running)
        .join(pre, [*GROUP_PERIOD, "user_id", "event_type"], "left")
        .groupBy(*GROUP_PERIOD, "is_control", "event_type", "window_end")
        .agg(
            *(F.sum(growth[column]).alias(column) for column in COUNT_COLUMNS),
            *(F.sum(x * growth[crossed]).alias(column)
              for crossed, column in zip(CROSSED_METRICS, COVARIATE_COLUMNS[2:], strict=True)),
        )
        .select(
            *GROUP_PERIOD, "is_control", "event_type", "window_end", _zero("triggered"),
            *COUNT_COLUMNS, *(_zero(name) for name in COVARIATE_COLUMNS[:2]),
            *COVARIATE_COLUMNS[2:],
        )
    )


def window_deltas(
    raw_events: DataFrame,
    raw_activations: DataFrame,
    periods: DataFrame,
    window_ms: int,
    since_ms: int,
    until_ms: int,
    pre_windows: int = 0,
) -> DataFrame:
    """All deltas (DELTA_COLUMNS) of the given periods from raw data in [since, until);
    events from `pre_windows` + 1 windows earlier, for the pre-exposure counts."""
    triggers = first_triggers(raw_activations, periods, since_ms, until_ms)
    events = clean_events(raw_events, since_ms - (pre_windows + 1) * window_ms, until_ms)
    pre = pre_exposure(events, triggers, window_ms, pre_windows)
    deltas = (
        trigger_deltas(triggers, window_ms)
        .unionByName(pre_exposure_deltas(pre, triggers, window_ms))
        .unionByName(event_deltas(events, triggers, pre, window_ms))
    )
    return deltas.select(
        *(F.col(name).cast(LongType()) if name in _LONGS else F.col(name)
          for name in DELTA_COLUMNS)
    )


_LONGS = frozenset(("period_start", "window_end", "triggered", *COUNT_COLUMNS,
                    *COVARIATE_COLUMNS))
