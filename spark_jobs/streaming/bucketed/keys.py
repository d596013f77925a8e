"""The bucket of a key: computed in the JVM before the stateful step, fixed per checkpoint."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

BUCKET_COLUMN = "bucket"
UNKEYED = -1  # the bucket of rows without a key (undecodable records): no state is touched


def bucket_of(key: Column, buckets: int) -> Column:
    """A key's bucket in [0, buckets), or UNKEYED for a null key. xxhash64 spreads user and
    view ids evenly whatever their distribution."""
    if buckets < 1:
        raise ValueError(f"buckets must be at least 1, got {buckets}")
    return F.when(key.isNull(), F.lit(UNKEYED)).otherwise(
        F.pmod(F.xxhash64(key), F.lit(buckets)))


def with_bucket(df: DataFrame, key: str, buckets: int) -> DataFrame:
    """`df` with BUCKET_COLUMN, the bucket of its `key` column."""
    return df.withColumn(BUCKET_COLUMN, bucket_of(F.col(key), buckets))
