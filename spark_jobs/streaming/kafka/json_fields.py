"""Top-level integer and string fields of JSON messages, read by the source (options
`jsonLongs` and `jsonStrings`).

A raw read hands the value bytes to a job that parses them itself (fraud_rules' engine, the
samples' de-duplication and join), yet the plan needs a few fields before that: the event
time its watermark follows, the key it groups by. Read in the JVM (`get_json_object`), each
row builds a Jackson parser over an InputStreamReader with its own 8 KB buffer: a quarter of
the JVM's samples and most of its garbage at 10k transactions/s, 28 % of them in
training_samples with its three fields (BENCHMARKS.md, 2026-11-29 sixth and seventh
sessions). The source already holds every message in Python; orjson reads every field there
in one parse of about a microsecond and the columns arrive typed.

A field is read as the jobs' own parsers read it: at the top level of an object, the last
one when a key repeats (as Python's json keeps it); a long is a JSON integer in the int64
range, a string a JSON string. Anything else (a numeric string for a long, a number for a
string, nesting, text that is not JSON, a message larger than the gate's bound) reads null.
The JSON gate's finer checks (nesting depth, number literals) are left to the job: a message
that passes orjson but fails those still gives its fields, as get_json_object gave them, and
the job then dead-letters the message.
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from spark_jobs.contracts.json_gate import INT64_MAX, INT64_MIN


def top_level_fields(value: bytes | None, longs: Sequence[str], strings: Sequence[str],
                     max_bytes: int) -> tuple[int | str | None, ...]:
    """Each named top-level integer field, then each named string field, of the JSON object
    in `value` (None where there is none)."""
    if value is None or len(value) > max_bytes:
        return (None,) * (len(longs) + len(strings))
    try:
        decoded = orjson.loads(value)
    except orjson.JSONDecodeError:
        return (None,) * (len(longs) + len(strings))
    if type(decoded) is not dict:
        return (None,) * (len(longs) + len(strings))
    return (*(_long(decoded.get(name)) for name in longs),
            *(_string(decoded.get(name)) for name in strings))


def top_level_longs(value: bytes | None, names: Sequence[str], max_bytes: int
                    ) -> tuple[int | None, ...]:
    """Each named top-level integer field of the JSON object in `value`, or None."""
    return top_level_fields(value, names, (), max_bytes)  # type: ignore[return-value]


def _long(value: object) -> int | None:
    if type(value) is int and INT64_MIN <= value <= INT64_MAX:  # bool is not an int here
        return value
    return None


def _string(value: object) -> str | None:
    return value if type(value) is str else None


def field_columns(values: Sequence[bytes | None], longs: Sequence[str], strings: Sequence[str],
                  max_bytes: int) -> list[list[int | str | None]]:
    """The named fields of every message, one column (list) per name: longs, then strings."""
    if not longs and not strings:
        return []
    rows = [top_level_fields(value, longs, strings, max_bytes) for value in values]
    return ([list(column) for column in zip(*rows, strict=True)] if rows
            else [[] for _ in (*longs, *strings)])
