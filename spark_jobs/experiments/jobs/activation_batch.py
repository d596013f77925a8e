"""filter_activations' plan for one micro-batch: every activation ends as exactly one row.

- "dead": undecodable (`malformed`, the decoder's detail) or from the future (`future`: its
  event time more than jobs.max_clock_skew ahead of its Kafka timestamp; the job has no
  watermark, so the check is here rather than in `event_time.with_event_time`);
- "ok": inside a period of the snapshot, with that period's start and is_control;
- "dropped": in no period of the snapshot, counted as `outside_period` (one per row) so a
  stale snapshot shows in the progress report instead of activations vanishing silently.

Only Spark expressions over decoded, range-checked fields run per row, so no record can fail
the batch; a future record's detail is written on the driver (`future_details`).
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_jobs.contracts.reasons import FUTURE, MALFORMED, OUTSIDE_PERIOD
from spark_jobs.experiments.jobs.filter_sink import KIND_OK
from spark_jobs.streaming.event_time import FUTURE_COLUMN, future_by_ms, future_detail
from spark_jobs.streaming.lake.dead_letters import DROPPED_COLUMN, KIND_DEAD, KIND_DROPPED


def filter_batch(batch: DataFrame, snapshot: DataFrame, period_ms: int,
                 max_clock_skew_ms: int) -> DataFrame:
    """The batch joined with the snapshot (columns s_experiment_hash, s_experiment_group,
    s_start, s_is_control): one row per activation, of kind ok, dead or dropped."""
    ahead = future_by_ms(F.col("ts"), F.col("kafka_timestamp"), max_clock_skew_ms)
    usable = F.col("error").isNull() & F.col(FUTURE_COLUMN).isNull()
    in_period = (
        (F.col("experiment_hash") == F.col("s_experiment_hash"))
        & (F.col("experiment_group") == F.col("s_experiment_group"))
        & usable
        & (F.col("ts") >= F.col("s_start"))
        & (F.col("ts") < F.col("s_start") + F.lit(period_ms))
    )
    joined = batch.withColumn(FUTURE_COLUMN, ahead).join(snapshot, in_period, "left")
    malformed, future = F.col("error").isNotNull(), F.col(FUTURE_COLUMN).isNotNull()
    outside = F.col("s_start").isNull()
    kind = (F.when(malformed | future, F.lit(KIND_DEAD))
            .when(outside, F.lit(KIND_DROPPED)).otherwise(F.lit(KIND_OK)))
    reason = (F.when(malformed, F.lit(MALFORMED)).when(future, F.lit(FUTURE))
              .when(outside, F.lit(OUTSIDE_PERIOD)))
    return joined.select(
        kind.alias("kind"),
        "user_id", "experiment_hash", "experiment_group", "ts",
        F.col("s_start").alias("group_ramp_time"), F.col("s_is_control").alias("is_control"),
        F.col("kafka_topic").alias("topic"), F.col("kafka_partition").alias("partition"),
        F.col("kafka_offset").alias("offset"), "kafka_timestamp",
        F.col("kafka_key").alias("key"), "raw_value", reason.alias("reason"),
        F.col("error").alias("detail"), FUTURE_COLUMN,
        F.when(~(malformed | future) & outside, F.lit(1)).cast("long").alias(DROPPED_COLUMN),
    )


def future_details(table: pa.Table) -> pa.Table:
    """The collected batch with each future record's detail written, FUTURE_COLUMN dropped."""
    ahead = table[FUTURE_COLUMN].to_pylist()
    details = [detail if by is None else future_detail(by)
               for by, detail in zip(ahead, table["detail"].to_pylist(), strict=True)]
    at = table.schema.get_field_index("detail")
    return table.set_column(at, "detail", pa.array(details, pa.string())).drop_columns(
        [FUTURE_COLUMN])
