"""Frames of filter_events' bucketed capping: a bucket's input as one frame, its columns to
core/cap_batch.py, and its accepted rows back out as an output frame of the job's schema,
column by column (no Python object per accepted row)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
from pyspark.sql.types import StructType

from spark_jobs.experiments.core.cap_batch import cap_batch
from spark_jobs.experiments.core.capping import HourlyCap
from spark_jobs.streaming.bucketed.frames import to_frame

KIND_OK = "ok"
# output column <- input column of an accepted event (the other output columns stay null)
ACCEPTED_COLUMNS = {
    "user_id": "user_id", "event_type": "event_type", "ts": "ts", "topic": "kafka_topic",
    "partition": "kafka_partition", "offset": "kafka_offset",
    "kafka_timestamp": "kafka_timestamp", "key": "kafka_key",
}


def bucket_frame(frames: Iterable[pd.DataFrame], fields: Sequence[str]) -> pd.DataFrame:
    """A bucket's input frames as one frame of `fields`, in arrival order."""
    parts = [frame[list(fields)] for frame in frames if len(frame)]
    if not parts:
        return pd.DataFrame({name: pd.Series([], dtype="Int64") for name in fields})
    return parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)


def cap_frame(counters: Mapping[int, HourlyCap], frame: pd.DataFrame, watermark_ms: int
              ) -> np.ndarray:
    """cap_batch over a frame whose user_id, ts, kafka_partition and kafka_offset are set."""
    def column(name: str) -> np.ndarray:
        return frame[name].to_numpy(dtype=np.int64)

    return cap_batch(counters, column("user_id"), column("ts"), column("kafka_partition"),
                     column("kafka_offset"), watermark_ms)


def accepted_frame(rows: pd.DataFrame, schema: StructType) -> pd.DataFrame:
    """Output rows of kind "ok" for accepted input `rows`, typed as `to_frame` types them."""
    n = len(rows)
    dtypes = to_frame([], schema).dtypes
    columns: dict[str, object] = {}
    for name in schema.fieldNames():
        source = ACCEPTED_COLUMNS.get(name)
        if name == "kind":
            columns[name] = np.full(n, KIND_OK, dtype=object)
        elif source is None:
            columns[name] = pd.array([None] * n, dtype=dtypes[name])
        elif pd.api.types.is_object_dtype(dtypes[name]):
            values = rows[source].to_numpy(dtype=object)
            columns[name] = np.where(pd.isna(values), None, values) if n else values
        else:
            columns[name] = rows[source].astype(dtypes[name]).array
    return pd.DataFrame(columns)
