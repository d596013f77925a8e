"""What a bucketed job keeps per key, read back from its checkpoint.

The state data source returns one row per bucket (streaming/bucketed/store.py); decoding the
blobs gives the keys held and each key's own bytes, so the state per active user (or view,
or window) is measured on what Spark stored, not estimated from the pure logic.
"""

from __future__ import annotations

from typing import Any

from spark_jobs.streaming.bucketed.store import BucketStore

APPLY_IN_PANDAS_BLOB = "value.groupState.blob"  # applyInPandasWithState's state column


def bucket_state(spark: Any, checkpoint: str, batch_id: int, buckets: int,
                 operator_id: int = 0, column: str = APPLY_IN_PANDAS_BLOB,
                 options: dict[str, str] | None = None) -> dict[str, Any]:
    """Buckets, keys, stored bytes and bytes per key of one bucketed operator after
    `batch_id`."""
    frame = (spark.read.format("statestore").option("path", checkpoint)
             .option("batchId", batch_id).option("operatorId", operator_id)
             .options(**(options or {})).load())
    blobs = [row[0] for row in frame.selectExpr(f"{column} AS blob").toLocalIterator()]
    stores = [BucketStore.from_blob(blob, buckets) for blob in blobs if blob]
    keys = sum(len(store) for store in stores)
    stored = sum(len(blob) for blob in blobs if blob)
    payload = sum(len(value) for store in stores for value in store.payloads.values())
    return {
        "batch": batch_id, "buckets": len(stores), "keys": keys, "stored_bytes": stored,
        "stored_bytes_per_key": round(stored / keys) if keys else None,
        "payload_bytes_per_key": round(payload / keys) if keys else None,
    }
