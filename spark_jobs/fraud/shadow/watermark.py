"""The highest watermark the `fraud_rules` job can have used for each input, without its batches.

Spark gives batch N the watermark max(eventTime of batches before N) - fraud.lateness (0 before
any), and the source cuts every batch at one Kafka time across both topics, so every record of
an earlier batch has a Kafka timestamp at or before the record's own. The newest eventTime
among the transactions up to a record's Kafka time, minus the lateness, is therefore an upper
bound of the watermark the job applied to it, whatever the batches were. A transaction at or
above that bound was on time in the job for certain; one below it may have been late.

The eventTime here is what the job's plan reads: the source's reading of the top-level
integer field (streaming/kafka/json_longs.py), kept when within 0..MAX_TIME_MS, from every
transaction message, also one the engine then dead-letters (an id missing, say). The job skips
a message larger than jobs.max_message_bytes; this reads every size, so where the settings
differ the bound only errs upwards (more transactions left out as uncertain, never one wrongly
counted as on time).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from spark_jobs.contracts.records import MAX_TIME_MS
from spark_jobs.fraud.core.keys import EVENT_TIME_FIELD
from spark_jobs.fraud.core.output_rows import KIND_TRANSACTION
from spark_jobs.streaming.kafka.json_longs import top_level_longs

_FIELDS = (EVENT_TIME_FIELD,)


def spark_event_time(raw: bytes | str | None) -> int | None:
    """The eventTime the job's watermark takes from one transaction message (see above)."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    (found,) = top_level_longs(data, _FIELDS, sys.maxsize)
    return found if found is not None and 0 <= found <= MAX_TIME_MS else None


def watermark_bounds(rows: Sequence[Any], lateness_ms: int) -> list[int]:
    """For rows in arrival order (Kafka time ascending), the highest watermark each can have
    been applied with: the newest eventTime of any transaction at or before its Kafka time,
    minus the lateness, and never below Spark's initial 0."""
    bounds: list[int] = []
    newest: int | None = None
    start = 0
    while start < len(rows):
        stamp = rows[start].kafka_timestamp
        end = start
        while end < len(rows) and rows[end].kafka_timestamp == stamp:
            if rows[end].kind == KIND_TRANSACTION:
                found = spark_event_time(rows[end].value)
                if found is not None and (newest is None or found > newest):
                    newest = found
            end += 1
        bound = 0 if newest is None else max(0, newest - lateness_ms)
        bounds += [bound] * (end - start)
        start = end
    return bounds
