"""Arrow schemas of the job's Delta tables, shared by the streaming sink and the shadow check."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa


def sample_schema(signals: Sequence[str]) -> pa.Schema:
    """The `training_samples` table: the contract's sample fields, labels (one int per
    signal) in config order."""
    labels = pa.struct([pa.field(s, pa.int32(), nullable=False) for s in signals])
    return pa.schema(
        [
            pa.field("sample_id", pa.string(), nullable=False),
            pa.field("view_id", pa.string()),
            pa.field("user_id", pa.int64()),
            pa.field("post_id", pa.int64()),
            pa.field("ts", pa.int64()),
            pa.field("context", pa.string()),
            pa.field("labels", labels),
        ]
    )


ORPHAN_SCHEMA = pa.schema(
    [
        pa.field("user_id", pa.int64()),
        pa.field("post_id", pa.int64()),
        pa.field("view_id", pa.string()),
        pa.field("signal", pa.string()),
        pa.field("ts", pa.int64()),
        pa.field("reason", pa.string()),
        pa.field("raw_value", pa.string()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("kafka_timestamp", pa.int64()),
    ]
)
