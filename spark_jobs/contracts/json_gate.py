"""The checks every JSON message passes before any job uses it (CONTRACTS section 9).

Hostile input must end as a `malformed` dead letter, never as an exception deep inside a job:
a message larger than `jobs.max_message_bytes`, bytes that are not UTF-8, lone surrogates,
nesting deeper than 64 levels, integers outside signed 64-bit range and numbers that no float
holds (1e999999999 overflows, 1e-999 vanishes). orjson rejects the first ones itself; the
numeric ones need the literal's text, so two scans of the bytes pick the rare messages that
get an exact second look with the standard library's literal hooks (see load_json).
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
# digits may leave the float range. The gate decides as if every message this finds something
# in got the exact, slower check first (the leading digit written once: the same matches,
# scanned twice as fast)
_SUSPECT_NUMBER = re.compile(rb"[0-9](?:[0-9]{18}|[eE][+-]?[0-9]{3})")
# The same, only where a number literal of valid JSON starts: after `[`, `,` or `:` (or at
# the start) and JSON whitespace, `-`?, then 19+ digits before or after the point (a long
# fraction such as 0.000...01 underflows too) or an exponent of 3+ digits. Every match also
# matches _SUSPECT_NUMBER. Digits in strings no longer count (in training_samples' traffic
# all of _SUSPECT_NUMBER's hits, 11 % of engagements and 37 % of views, were in uuids and hex
# ids: "...991e-0682..."), unless a `:` or `,` in the string precedes them (the exact check
# then runs for nothing). Searched on every message instead of _SUSPECT_NUMBER, and cheaper:
# a pattern starting with a character class (the start is a second, anchored pattern).
_LITERAL_TAIL = rb"-?[0-9](?:[0-9]{18}|[0-9]*+(?:\.[0-9]{19}|(?:\.[0-9]++)?[eE][+-]?[0-9]{3}))"
_SUSPECT_LITERAL = re.compile(rb"[\[,:][ \t\r\n]*+" + _LITERAL_TAIL)
_SUSPECT_FIRST_LITERAL = re.compile(rb"[ \t\r\n]*+" + _LITERAL_TAIL)  # matched at the start
# What every match of the two above holds, cheap to look for first: 19 digits in a row or an
# exponent of 3 digits. With every digit marked "0", E as "e" and the signs removed (one C
# pass: removing a sign can join digits, never part them), that is one of these substrings.
# The two scans cost 1.3 µs on a 124-byte transaction, three times orjson's parse of it; the
# marks ~0.5 (BENCHMARKS.md, 2026-11-29 second session).
_MARKED = bytes.maketrans(b"123456789E", b"000000000e")
_SIGNS = b"+-"
_NINETEEN_DIGITS, _EXPONENT_OF_THREE = b"0" * 19, b"e000"


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
    # Decisions and details are those of: the exact check when _SUSPECT_NUMBER finds
    # something, then orjson, then the depth. The exact check is pure, so it runs early for
    # a suspect literal (_SUSPECT_NUMBER matches too), else late, only when orjson or the
    # depth refuses the message (its own refusal, if any, still wins). Where orjson accepts,
    # the depth is <= 64 and no literal is suspect, it could not refuse: orjson took RFC 8259
    # JSON in UTF-8 (no BOM, no NUL, no NaN or Infinity, whitespace only [ \t\r\n]), which
    # the stdlib decodes as UTF-8 and parses alike (no RecursionError at depth <= 64), and
    # every literal starts at the start or after `[`, `,`, `:` and whitespace, so the scans
    # saw it: <= 18 digits before and after the point and <= 2 in the exponent fit an int64
    # (< 10**18) and a float (10**-117 <= |x| < 10**117, or 0).
    exact_pending = True
    if may_hold_suspect_literal(data) and (
            _SUSPECT_LITERAL.search(data) or _SUSPECT_FIRST_LITERAL.match(data)):
        check_number_literals(data)
        exact_pending = False
    problem = None
    try:
        decoded = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        problem = f"not valid JSON: {exc}"
    else:
        if data.count(b"[") + data.count(b"{") > MAX_DEPTH:
            try:
                check_depth(decoded)
            except MalformedJson as exc:
                problem = str(exc)
    if problem is not None:
        if exact_pending and _SUSPECT_NUMBER.search(data):
            check_number_literals(data)
        raise MalformedJson(problem)
    return decoded


_FLAT_SCALARS = (str, float, bool, type(None))  # int: checked against int64


def is_flat_object(value: Any) -> bool:
    """A JSON object whose values are all scalars, every integer within int64."""
    if type(value) is not dict:
        return False
    for item in value.values():
        kind = type(item)
        if kind is int:
            if not INT64_MIN <= item <= INT64_MAX:
                return False
        elif kind not in _FLAT_SCALARS:
            return False
    return True


def compact_flat_object(data: bytes, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
                        ) -> dict[str, Any] | None:
    """load_json's result for a message that is certain to pass the gate, without its scans
    (a third of a flat message's parse): None unless orjson reads a flat object
    (is_flat_object) of at most `max_bytes` and writes it back byte for byte, as producers
    write JSON. Such a message passes every check: orjson took valid UTF-8 without a BOM or
    a lone surrogate, it nests one level, its integers fit int64, and each float literal is
    orjson's own text of a finite float, which the exact check accepts (it refuses overflow
    to infinity and a non-zero literal read as zero). No key is repeated either (the object
    would have fewer keys than its text). Anything else goes through load_json."""
    if len(data) > max_bytes:
        return None
    try:
        decoded = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if not is_flat_object(decoded) or orjson.dumps(decoded) != data:
        return None
    return decoded


def may_hold_suspect_literal(data: bytes) -> bool:
    """False only when no suspect literal can be in `data` (a necessary condition of
    _SUSPECT_LITERAL and _SUSPECT_FIRST_LITERAL matching, not a sufficient one)."""
    marked = data.translate(_MARKED, _SIGNS)
    return marked.find(_NINETEEN_DIGITS) >= 0 or marked.find(_EXPONENT_OF_THREE) >= 0


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
