"""Which views are first arrivals of their view_id, in batch (Spark SQL): the rule of
core/dedup.py (CONTRACTS.md section 9, last bullet), computed independently of it.

Per view_id, across users, the arrivals in (Kafka timestamp, partition, offset) order; the
first is kept, and a later one is a duplicate of the kept one before it unless its ts is at
least that one's ts + dedup_ttl, when it is kept in turn (no TTL: never). Each arrival gets
the first arrival it is judged against (`first_ts`, `first_user_id`, `first_post_id`: itself
when kept), which is what the engagements naming the id are checked against.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, BooleanType, IntegerType, LongType, StructField, StructType

FIRST_COLUMNS = ("first_ts", "first_user_id", "first_post_id")
_FIRST = StructType([StructField("ts", LongType()), StructField("user_id", LongType()),
                     StructField("post_id", LongType())])
_JUDGED = StructType([
    StructField("kafka_partition", IntegerType()), StructField("kafka_offset", LongType()),
    StructField("kept", BooleanType()),
    *(StructField(name, LongType()) for name in FIRST_COLUMNS),
])


def judged_views(views: DataFrame, dedup_ttl_ms: int | None) -> DataFrame:
    """`views` (view_id, user_id, post_id, ts, kafka_partition, kafka_offset and optionally
    kafka_timestamp, one row per arrival) with `kept` and the FIRST_COLUMNS."""
    if dedup_ttl_ms is not None and dedup_ttl_ms <= 0:
        raise ValueError(f"dedup_ttl_ms must be positive, got {dedup_ttl_ms}")
    kts = F.col("kafka_timestamp") if "kafka_timestamp" in views.columns else F.lit(0)
    arrival = F.struct(  # sort_array orders structs by their fields in this order
        kts.cast("long").alias("kts"), F.col("kafka_partition").cast("int").alias("p"),
        F.col("kafka_offset").cast("long").alias("o"), F.col("ts").alias("ts"),
        F.col("user_id").alias("user_id"), F.col("post_id").alias("post_id"),
    )
    arrivals = views.groupBy("view_id").agg(F.sort_array(F.collect_list(arrival)).alias("a"))

    def step(acc: Column, x: Column) -> Column:
        first = acc["first"]
        kept = first.isNull()
        if dedup_ttl_ms is not None:
            kept = kept | (x["ts"] >= first["ts"] + F.lit(dedup_ttl_ms))
        now = F.when(kept, F.struct(x["ts"].alias("ts"), x["user_id"].alias("user_id"),
                                    x["post_id"].alias("post_id"))).otherwise(first)
        judged = F.struct(x["p"].alias("kafka_partition"), x["o"].alias("kafka_offset"),
                          kept.alias("kept"), now["ts"].alias("first_ts"),
                          now["user_id"].alias("first_user_id"),
                          now["post_id"].alias("first_post_id"))
        return F.struct(now.alias("first"), F.concat(acc["out"], F.array(judged)).alias("out"))

    start = F.struct(F.lit(None).cast(_FIRST).alias("first"),
                     F.array().cast(ArrayType(_JUDGED)).alias("out"))
    judged = arrivals.select("view_id", F.inline(F.aggregate("a", start, step)["out"]))
    return views.join(judged, ["view_id", "kafka_partition", "kafka_offset"])
