"""Hostile records (CONTRACTS section 9), built from one valid record of a topic.

One list for every system's live hostile test and fuzz tests: each entry is a label, the
message bytes (None: a null value) and the dead-letter reason the job must give it. Hypothesis
strategies below mutate valid records the same ways, at random.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import strategies as st

TEN_YEARS_MS = 10 * 365 * 86_400_000
MAX_MESSAGE_BYTES = 1 << 20  # jobs.max_message_bytes default


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def _with(record: Mapping[str, Any], field: str, literal: str) -> bytes:
    """The record with one field's JSON text replaced by `literal` (kept verbatim)."""
    marker = "\u0000MARK\u0000"
    text = json.dumps({**record, field: marker})
    return text.replace(json.dumps(marker), literal).encode("utf-8", "surrogatepass")


def hostile_messages(record: Mapping[str, Any], *, int_field: str, string_field: str,
                     time_field: str | None, number_field: str | None = None,
                     max_message_bytes: int = MAX_MESSAGE_BYTES,
                     ) -> list[tuple[str, bytes | None, str]]:
    """(label, message, reason) of every hostile kind, from a valid `record`: `int_field` an
    integer field, `string_field` a string one, `time_field` the event time (ms) or None when
    the topic has none, `number_field` one that may hold a decimal number; the huge message
    is just over `max_message_bytes` (a live test sets jobs.max_message_bytes small: a
    producer refuses messages over ~1 MB)."""
    number_field = number_field or int_field
    messages: list[tuple[str, bytes | None, str]] = [
        ("random bytes", bytes(range(256)) * 2, "malformed"),
        ("not UTF-8", _with(record, string_field, '"caf\xe9"').replace(b"\xc3\xa9", b"\xe9"),
         "malformed"),
        ("lone surrogate", _with(record, string_field, '"\\ud800"'), "malformed"),
        ("raw lone surrogate", _with(record, string_field, '"\ud800"'), "malformed"),
        ("nesting 200 deep", _with(record, string_field, "[" * 200 + "]" * 200), "malformed"),
        ("int64 overflow", _with(record, int_field, "9223372036854775808"), "malformed"),
        ("far beyond int64", _with(record, int_field, "1" * 40), "malformed"),
        ("infinite number", _with(record, number_field, "1e999999999"), "malformed"),
        ("vanishing number", _with(record, number_field, "1e-999999999"), "malformed"),
        ("huge message", _dumps({**record, "pad": "x" * (max_message_bytes + 10)}),
         "malformed"),
        ("null value", None, "malformed"),
        ("not an object", b"[1, 2, 3]", "malformed"),
        ("empty", b"", "malformed"),
    ]
    if time_field is not None:
        ahead = {**record, time_field: record[time_field] + TEN_YEARS_MS}
        messages.append(("clock ten years ahead", _dumps(ahead), "future"))
    return messages


# -- hypothesis: mutations of valid records ---------------------------------------------------
EXTREME_NUMBERS = ("9223372036854775807", "9223372036854775808", "-9223372036854775809",
                   "1" * 25, "1e308", "1e309", "-1e400", "1e-400", "0e99999", "-0", "0.0",
                   "1.7976931348623157e308", "5e-324", "123456789.123456789123456789")
BAD_STRINGS = ('"\\ud800"', '"\\udfff"', '"\\ud800\\u0041"', '""', '"\\u0000"', '"' + "x" * 5000
               + '"', '"\u00e9\u4e2d\U0001f600"')


def json_values(depth: int = 3) -> st.SearchStrategy[Any]:
    """Arbitrary JSON values (as Python objects)."""
    leaves = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False,
                                                                   allow_infinity=False) | st.text()
    return st.recursive(leaves, lambda inner: st.lists(inner, max_size=4)
                        | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                        max_leaves=depth * 4)


@st.composite
def mutated(draw: st.DrawFn, record: Mapping[str, Any], fields: Sequence[str]) -> bytes:
    """A valid record with one of: a field replaced by an extreme literal or arbitrary JSON,
    removed, deeply nested; random bytes spliced in; or cut short."""
    field = draw(st.sampled_from(list(fields)))
    how = draw(st.sampled_from(("extreme", "bad string", "any json", "drop", "nest", "splice",
                                "truncate")))
    if how == "extreme":
        return _with(record, field, draw(st.sampled_from(EXTREME_NUMBERS)))
    if how == "bad string":
        return _with(record, field, draw(st.sampled_from(BAD_STRINGS)))
    if how == "any json":
        return _dumps({**record, field: draw(json_values())})
    if how == "drop":
        return _dumps({k: v for k, v in record.items() if k != field})
    if how == "nest":
        depth = draw(st.integers(min_value=60, max_value=3000))
        return _with(record, field, "[" * depth + "]" * depth)
    valid = _dumps(record)
    if how == "splice":
        at = draw(st.integers(min_value=0, max_value=len(valid)))
        return valid[:at] + draw(st.binary(min_size=1, max_size=16)) + valid[at:]
    return valid[:draw(st.integers(min_value=0, max_value=len(valid) - 1))]


def messages(record: Mapping[str, Any], fields: Sequence[str]) -> st.SearchStrategy[bytes]:
    """Random bytes, mutated valid records and the valid record itself."""
    return st.one_of(st.binary(max_size=64), mutated(record, fields), st.just(_dumps(record)))
