"""The highest watermark the `fraud_rules` job can have used for each input, without its batches.

Spark gives batch N the watermark max(eventTime of batches before N) - fraud.lateness (0 before
any), and the source cuts every batch at one Kafka time across both topics, so every record of
an earlier batch has a Kafka timestamp at or before the record's own. The newest eventTime
among the transactions up to a record's Kafka time, minus the lateness, is therefore an upper
bound of the watermark the job applied to it, whatever the batches were. A transaction at or
above that bound was on time in the job for certain; one below it may have been late.

The eventTime here is what the job's plan read up to 2026-11-29 (`get_json_object` then
`try_cast` to long, kept when within 0..MAX_TIME_MS): also from a message the engine
dead-letters, such as a numeric string. The job now takes it from its source
(streaming/kafka/json_fields.py: a top-level JSON integer only, the last of a repeated key),
whose every reading this one also finds, so one bound holds for data either release
processed. Where this reading may differ from Spark's (text that is not JSON, repeated keys),
it takes the larger candidate, so the bound only ever errs upwards (more transactions left
out as uncertain, never one wrongly counted as on time).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from spark_jobs.contracts.records import MAX_TIME_MS
from spark_jobs.fraud.core.keys import lenient_text
from spark_jobs.fraud.core.output_rows import KIND_TRANSACTION

FIELD = "eventTime"
_INTEGER = re.compile(r"\s*[+-]?\d+\s*")
# in text that is not JSON, any eventTime-like pair (Spark's parser is lenient: quotes, garbage)
_ANYWHERE = re.compile(r"""eventTime["']?\s*:\s*["']?\s*([+-]?\d+)""")


def _as_long(value: Any) -> int | None:
    """A JSON value as `try_cast(... as long)` of its get_json_object text would read it."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _INTEGER.fullmatch(value):
        return int(value)
    return None


def spark_event_time(raw: bytes | str | None) -> int | None:
    """The eventTime the job's watermark takes from one transaction message (see above)."""
    text = lenient_text(raw)
    try:
        pairs = json.loads(text, object_pairs_hook=lambda items: items)
    except ValueError:
        candidates = [int(found) for found in _ANYWHERE.findall(text)]
    else:
        top = pairs if isinstance(pairs, list) and all(
            isinstance(p, tuple) for p in pairs) else []
        candidates = [v for k, value in top if k == FIELD and (v := _as_long(value)) is not None]
    valid = [c for c in candidates if 0 <= c <= MAX_TIME_MS]
    return max(valid, default=None)


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
