"""A view's context as compact JSON text: what `json.dumps(separators=(",", ":"),
ensure_ascii=False)` writes, in a fraction of its time.

Every view's context is written once per view (core/records.py), the most expensive step of
parsing a view after the JSON gate. orjson writes the same text for every JSON value the gate
lets through (strings, int64 integers, finite floats, booleans, null, nesting up to 64), but
for floats of magnitude below 1e-4, which Python writes with an exponent (`1e-05`) and orjson
without (`0.00001`): a context holding one is written by json as before. The text is the
contract (CONTRACTS section 8: the view's other fields as a JSON string), so the two must
agree to the byte (tests/samples/test_context_text.py compares them).
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_EXPONENT_BELOW = 1e-4  # Python's repr writes nonzero floats below this with an exponent


def compact_json(value: dict[str, Any]) -> str:
    """`value` as json.dumps(value, separators=(",", ":"), ensure_ascii=False) writes it."""
    if _same_in_orjson(value):
        try:
            return orjson.dumps(value).decode()
        except orjson.JSONEncodeError:  # beyond what the gate lets through: json decides
            pass
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _same_in_orjson(value: dict[str, Any]) -> bool:
    """No float that orjson would write otherwise than Python's repr, at any depth."""
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        for v in (item.values() if type(item) is dict else item):
            kind = type(v)
            if kind is float:
                if v != 0.0 and -_EXPONENT_BELOW < v < _EXPONENT_BELOW:
                    return False
            elif kind is dict or kind is list:
                stack.append(v)
    return True
