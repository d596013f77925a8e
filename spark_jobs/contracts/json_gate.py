"""The checks every JSON message passes before any job uses it (CONTRACTS section 9).

Hostile input must end as a `malformed` dead letter, never as an exception deep inside a job:
a message larger than `jobs.max_message_bytes`, bytes that are not UTF-8, lone surrogates,
nesting deeper than 64 levels, integers outside signed 64-bit range and numbers that no float
holds (1e999999999 overflows, 1e-999 vanishes). orjson rejects the first ones itself; the
numeric ones need the literal's text, so a cheap scan of the bytes picks the rare messages
that get an exact second look with the standard library's literal hooks.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal, InvalidOperation
from typing import Any

import orjson

MAX_DEPTH = 64
DEFAULT_MAX_MESSAGE_BYTES = 1 << 20
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# a literal with 19+ digits may leave int64 (or become a float in orjson); an exponent of 3+
# digits may leave the float range: only such messages get the exact, slower check (the
# leading digit written once: the same matches, scanned twice as fast)
_SUSPECT_NUMBER = re.compile(rb"[0-9](?:[0-9]{18}|[eE][+-]?[0-9]{3})")


class MalformedJson(ValueError):
    """A message that fails the gate; str(error) says what is wrong (the dead-letter detail)."""


def load_json(value: bytes | str | None, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> Any:
    """The decoded JSON value of a message, or MalformedJson naming what is wrong."""
    if value is None:
        raise MalformedJson("empty message (null value)")
    data = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else bytes(value)
    if len(data) > max_bytes:
        raise MalformedJson(
            f"message of {len(data)} bytes is larger than jobs.max_message_bytes ({max_bytes})")
    if _SUSPECT_NUMBER.search(data):
        check_number_literals(data)
    try:
        decoded = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise MalformedJson(f"not valid JSON: {exc}") from None
    if data.count(b"[") + data.count(b"{") > MAX_DEPTH:
        check_depth(decoded)
    return decoded


def check_depth(value: Any, limit: int = MAX_DEPTH) -> None:
    """MalformedJson when arrays/objects nest deeper than `limit` (iterative: no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                raise MalformedJson(f"JSON nested deeper than {limit} levels")
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children
                         if isinstance(child, dict | list))


def check_number_literals(data: bytes) -> None:
    """MalformedJson, naming the field, for an integer literal outside int64 or a number no
    float holds (the standard library hands over each literal's text)."""
    try:
        decoded = json.loads(data, parse_int=_checked_int, parse_float=_checked_float,
                             parse_constant=_no_constant, object_pairs_hook=_named_bad)
    except MalformedJson:
        raise
    except (ValueError, RecursionError) as exc:  # orjson accepted it; be safe anyway
        raise MalformedJson(f"not valid JSON: {exc}") from None
    bad = _first_bad(decoded)
    if bad is not None:  # in a top-level array, or arrays of arrays: no field name
        raise MalformedJson(bad.problem)


class _Bad:
    """A number literal that does not fit, kept until its field's name is known."""

    def __init__(self, problem: str) -> None:
        self.problem = problem


def _checked_int(text: str) -> int | _Bad:
    if len(text.lstrip("-")) > 19 or not INT64_MIN <= int(text) <= INT64_MAX:
        return _Bad(f"integer {_short(text)} is out of the 64-bit range")
    return 0


def _checked_float(text: str) -> float | _Bad:
    if not float_literal_fits(text):
        return _Bad(f"number {_short(text)} does not fit a 64-bit float")
    return 0.0


def _named_bad(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    for name, value in pairs:
        bad = value if isinstance(value, _Bad) else (
            _first_bad(value) if isinstance(value, list) else None)
        if bad is not None:
            raise MalformedJson(f"field {name!r}: {bad.problem}")
    return {}


def _first_bad(value: Any) -> _Bad | None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Bad):
            return item
        if isinstance(item, list):
            stack.extend(item)
    return None


def float_literal_fits(text: str) -> bool:
    """False when the number `text` overflows a float or underflows it to zero."""
    try:
        exact = Decimal(text)
        as_float = float(exact)
    except (InvalidOperation, ValueError):  # an exponent beyond even Decimal's range
        return False
    return not math.isinf(as_float) and (as_float != 0.0 or exact == 0)


def _no_constant(text: str) -> float:
    raise MalformedJson(f"{text} is not a JSON number")


def _short(text: str, keep: int = 40) -> str:
    return text if len(text) <= keep else f"{text[:keep]}... ({len(text)} characters)"
