"""Frames of filter_events' bucketed capping: a bucket's input as one frame, its columns to
core/cap_batch.py, and its accepted rows back out as an output frame of the job's schema,
column by column (no Python object per accepted row, no pandas work per row)."""

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
    """A bucket's input frames as one frame holding `fields`, in arrival order."""
    parts = [frame for frame in frames if len(frame)]
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


class AcceptedFrames:
    """Output frames of kind "ok" for accepted input rows, typed as `to_frame` types them."""

    def __init__(self, schema: StructType) -> None:
        self.names = schema.fieldNames()
        self.dtypes = to_frame([], schema).dtypes.to_dict()

    def __call__(self, frame: pd.DataFrame, rows: np.ndarray) -> pd.DataFrame:
        """The output rows of `frame`'s rows at positions `rows`."""
        n = len(rows)
        every = n == len(frame)
        columns: dict[str, object] = {}
        for name in self.names:
            dtype, source = self.dtypes[name], ACCEPTED_COLUMNS.get(name)
            if name == "kind":
                columns[name] = np.full(n, KIND_OK, dtype=object)
            elif source is None:
                columns[name] = _nulls(n, dtype)
            else:
                values = frame[source].array
                if values.dtype != dtype:
                    values = pd.array(values, dtype=dtype)
                columns[name] = _no_nan(values if every else values.take(rows))
        return pd.DataFrame(columns, copy=False)


def _nulls(n: int, dtype: object) -> object:
    """`n` nulls of a column type: None objects, or a nullable (masked) array all masked."""
    if pd.api.types.is_object_dtype(dtype):
        return np.full(n, None, dtype=object)
    masked = dtype.construct_array_type()  # type: ignore[attr-defined]
    return masked(np.zeros(n, dtype=dtype.numpy_dtype), np.ones(n, dtype=bool))  # type: ignore[attr-defined]


def _no_nan(values: object) -> object:
    """Object columns with None for every null (a NaN would not convert to a string)."""
    if isinstance(values, pd.arrays.NumpyExtensionArray):
        values = values.to_numpy()
    if isinstance(values, np.ndarray) and values.dtype == object:
        nulls = pd.isna(values)
        if nulls.any():
            values = np.where(nulls, None, values)
    return values
