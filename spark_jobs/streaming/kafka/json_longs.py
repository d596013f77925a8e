"""Top-level integer fields of JSON messages, read by the source (option `jsonLongs`).

A raw read hands the value bytes to a job that parses them itself (fraud_rules' engine), yet
the plan needs one field before that, the event time its watermark follows. Read in the JVM
(`get_json_object`), each row builds a Jackson parser over an InputStreamReader with its own
8 KB buffer: a quarter of the JVM's samples and most of its garbage at 10k transactions/s
(BENCHMARKS.md, 2026-11-29 sixth session). The source already holds every message in Python;
orjson reads the field there in under a microsecond and the column arrives typed.

A field is read as the jobs' own parsers read it: a JSON integer in the int64 range at the
top level of an object (the last one when a key repeats, as Python's json keeps it). Anything
else (a numeric string, a float, nesting, text that is not JSON, a message larger than the
gate's bound) reads null. The JSON gate's finer checks (nesting depth, number literals) are
left to the job: a message that passes orjson but fails those still gives its field, as
get_json_object gave it, and the job then dead-letters the message.
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from spark_jobs.contracts.json_gate import INT64_MAX, INT64_MIN


def top_level_longs(value: bytes | None, names: Sequence[str], max_bytes: int
                    ) -> tuple[int | None, ...]:
    """Each named top-level integer field of the JSON object in `value`, or None."""
    if value is None or len(value) > max_bytes:
        return (None,) * len(names)
    try:
        decoded = orjson.loads(value)
    except orjson.JSONDecodeError:
        return (None,) * len(names)
    if type(decoded) is not dict:
        return (None,) * len(names)
    return tuple(_long(decoded.get(name)) for name in names)


def _long(value: object) -> int | None:
    if type(value) is int and INT64_MIN <= value <= INT64_MAX:  # bool is not an int here
        return value
    return None


def long_columns(values: Sequence[bytes | None], names: Sequence[str], max_bytes: int
                 ) -> list[list[int | None]]:
    """The named fields of every message, one column (list) per name."""
    rows = [top_level_longs(value, names, max_bytes) for value in values]
    return [list(column) for column in zip(*rows, strict=True)] if rows else [[] for _ in names]
