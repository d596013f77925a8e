"""Views and engagements: strict decoding of one Kafka message each, never raising.

A message becomes a View, an Engagement or a Rejected carrying its dead-letter reason
(`malformed`, `unknown_signal`), so one bad message never stops the job. A view's `context`
is the view object minus its four join fields, as compact JSON text in the received key
order; numbers go through Python's json, so comparisons of context must be semantic.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from spark_jobs.contracts.records import MAX_TIME_MS

MALFORMED = "malformed"
UNKNOWN_SIGNAL = "unknown_signal"

VIEW_FIELDS = ("view_id", "user_id", "post_id", "ts")
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1  # ids must fit the sinks' 64-bit columns


@dataclass(frozen=True, slots=True)
class Source:
    """Where a message came from: its dead-letter columns and its arrival order."""

    topic: str
    partition: int
    offset: int
    kafka_timestamp: int
    key: str | None

    @property
    def order(self) -> tuple[str, int, int]:
        """(topic, partition, offset): what "first arrival" and "later offset" compare."""
        return (self.topic, self.partition, self.offset)


@dataclass(frozen=True, slots=True)
class View:
    """A decoded view. `raw` (the received text) is only needed to dead-letter it."""

    view_id: str
    user_id: int
    post_id: int
    ts: int
    context: str
    source: Source
    raw: str = ""


@dataclass(frozen=True, slots=True)
class Engagement:
    """A decoded engagement; view_id None means "the latest view of the post before it"."""

    user_id: int
    post_id: int
    view_id: str | None
    signal: str
    ts: int
    raw: str
    source: Source


@dataclass(frozen=True, slots=True)
class Rejected:
    """A message that cannot be joined; raw is None only for a null Kafka value."""

    reason: str
    raw: str | None
    source: Source


Record = View | Engagement | Rejected


class _Malformed(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise _Malformed(f"{name} is not JSON")


def _text(value: str | bytes | None) -> tuple[str | None, bool]:
    """The message as text and whether it is valid UTF-8 (undecodable bytes replaced)."""
    if value is None:
        return None, False
    if isinstance(value, str):
        return value, True
    data = bytes(value)
    try:
        return data.decode("utf-8"), True
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace"), False


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A repeated key is ambiguous (parsers disagree on which value wins): malformed."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise _Malformed("repeated key")
    return obj


def _context(rest: dict[str, Any]) -> str:
    """The view's other fields as compact JSON; a number JSON cannot hold (1e400 parses as
    infinity) makes the view malformed rather than the context invalid JSON."""
    try:
        return _utf8(json.dumps(rest, separators=(",", ":"), ensure_ascii=False,
                                allow_nan=False))
    except ValueError as exc:
        raise _Malformed("number out of range") from exc


def _object(text: str) -> dict[str, Any]:
    try:
        obj = json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_unique_keys)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        raise _Malformed("not JSON") from exc
    if not isinstance(obj, dict):
        raise _Malformed("not a JSON object")
    return obj


def _long(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Malformed("not an integer")
    if not _LONG_MIN <= value <= _LONG_MAX:
        raise _Malformed("out of the 64-bit range")
    return value


def _time_ms(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TIME_MS:
        raise _Malformed("not an epoch time in milliseconds")
    return value


def _utf8(text: str) -> str:
    """Lone surrogates (legal as JSON escapes) cannot be written to Kafka or Delta."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _Malformed("not encodable as UTF-8") from exc
    return text


def _name(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise _Malformed("not a non-empty string")
    return _utf8(value)


def parse_view(value: str | bytes | None, source: Source) -> View | Rejected:
    """One `views` message: view_id (non-empty string), user_id and post_id (integers) and
    ts (epoch ms >= 0) are required; every other field is the sample's context."""
    text, utf8 = _text(value)
    if text is None or not utf8:
        return Rejected(MALFORMED, text, source)
    try:
        obj = _object(text)
        view_id = _name(obj.get("view_id"))
        user_id = _long(obj.get("user_id"))
        post_id = _long(obj.get("post_id"))
        ts = _time_ms(obj.get("ts"))
        rest = {k: v for k, v in obj.items() if k not in VIEW_FIELDS}
        context = _context(rest)
    except _Malformed:
        return Rejected(MALFORMED, text, source)
    return View(view_id, user_id, post_id, ts, context, source, text)


def parse_engagement(
    value: str | bytes | None, source: Source, signals: Sequence[str]
) -> Engagement | Rejected:
    """One `engagements` message: user_id, post_id (integers), signal (string), ts (epoch ms
    >= 0), view_id absent/null or a non-empty string. A well-formed message whose signal is
    not configured is rejected as `unknown_signal`; other fields are ignored."""
    text, utf8 = _text(value)
    if text is None or not utf8:
        return Rejected(MALFORMED, text, source)
    try:
        obj = _object(text)
        user_id = _long(obj.get("user_id"))
        post_id = _long(obj.get("post_id"))
        raw_view_id = obj.get("view_id")
        view_id = None if raw_view_id is None else _name(raw_view_id)
        signal = obj.get("signal")
        if not isinstance(signal, str):
            raise _Malformed("signal is not a string")
        ts = _time_ms(obj.get("ts"))
    except _Malformed:
        return Rejected(MALFORMED, text, source)
    if signal not in signals:
        return Rejected(UNKNOWN_SIGNAL, text, source)
    return Engagement(user_id, post_id, view_id, signal, ts, text, source)
