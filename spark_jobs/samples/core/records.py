"""Views and engagements: strict decoding of one Kafka message each, never raising.

A message becomes a View, an Engagement or a Rejected carrying its dead-letter reason
(`malformed`, `unknown_signal`) and a detail naming what is wrong, so one bad message never
stops the job. Every message first passes the JSON gate (contracts/json_gate: size against
`jobs.max_message_bytes`, UTF-8, lone surrogates, nesting, int64 and float range); an object
with a repeated key is malformed too (parsers disagree on which value wins).

A view's `context` is the view object minus its four join fields, as compact JSON text in
the received key order; numbers go through Python's json, so comparisons of context must be
semantic. What a sample echoes is bounded (CONTRACTS section 9), so that no sample can exceed
what a broker accepts: a view_id longer than MAX_ID_BYTES makes the record malformed (an id
cannot be cut), and a context longer than MAX_CONTEXT_BYTES is replaced by the truncated form
`{"_truncated":{"bytes":<its length>}}`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from spark_jobs.contracts.json_gate import (
    DEFAULT_MAX_MESSAGE_BYTES,
    MalformedJson,
    compact_flat_object,
    load_json,
)
from spark_jobs.contracts.records import (
    LONG,
    STRING,
    TIME_MS,
    RecordError,
    RecordSpec,
    json_type,
)
from spark_jobs.samples.core.context_text import compact_json

MALFORMED = "malformed"
UNKNOWN_SIGNAL = "unknown_signal"

VIEW_FIELDS = ("view_id", "user_id", "post_id", "ts")
MAX_ID_BYTES = 1_024  # a view_id (the sample's id and view_id) in UTF-8
MAX_CONTEXT_BYTES = 64 * 1_024  # a sample's context in UTF-8
_VIEW = RecordSpec("views", (("view_id", STRING), ("user_id", LONG), ("post_id", LONG),
                             ("ts", TIME_MS)))
_ENGAGEMENT = RecordSpec("engagements", (("user_id", LONG), ("post_id", LONG),
                                         ("ts", TIME_MS)))
_KEY_END = re.compile(rb'"\s*:')  # ends every key (and the odd `\":` inside a string)


# Source, View and Engagement are built by the hundred thousand per micro-batch (parsed, and
# decoded again from each user's state): a frozen dataclass costs ~5x a plain one to build
# (one object.__setattr__ call per field), so these are plain slotted dataclasses, hashable
# as frozen ones are, and never mutated (treat them as frozen).
@dataclass(slots=True, unsafe_hash=True)
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


@dataclass(slots=True, unsafe_hash=True)
class View:
    """A decoded view. `raw` (the received text) is only needed to dead-letter it."""

    view_id: str
    user_id: int
    post_id: int
    ts: int
    context: str
    source: Source
    raw: str = ""


@dataclass(slots=True, unsafe_hash=True)
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
    """A message that cannot be joined; raw is None only for a null Kafka value; detail says
    what is wrong (the dead letter's detail)."""

    reason: str
    raw: str | None
    source: Source
    detail: str | None = None


Record = View | Engagement | Rejected


def _text(value: str | bytes | None) -> str | None:
    """The message as text for a dead letter (undecodable bytes replaced)."""
    if value is None or isinstance(value, str):
        return value
    return bytes(value).decode("utf-8", errors="replace")


def _object(value: str | bytes | None, max_bytes: int) -> dict[str, Any]:
    """The message's JSON object through the gate, or RecordError naming what is wrong."""
    if type(value) is bytes:  # the usual compact, flat message: a third of the parse saved
        flat = compact_flat_object(value, max_bytes)
        if flat is not None:
            return flat
    data = None if value is None else (
        value.encode("utf-8", "surrogatepass") if isinstance(value, str) else bytes(value))
    try:
        obj = load_json(data, max_bytes)
    except MalformedJson as exc:
        raise RecordError(str(exc)) from None
    if not isinstance(obj, dict):
        raise RecordError(f"not a JSON object: got {json_type(obj)}")
    repeated = _repeated_key(data, obj) if data is not None else None
    if repeated is not None:
        raise RecordError(f"field {repeated!r} appears more than once")
    return obj


def _repeated_key(data: bytes, obj: dict[str, Any]) -> str | None:
    """The first key repeated within one object, or None. The decoder keeps the last value
    silently; fewer decoded keys than key ends in the text is the rare case worth an exact
    second look (the gate has bounded the depth and numbers already)."""
    # one `{` and no `[` in the whole text: nothing is nested, the object's keys are all
    # (the usual flat message, without walking it)
    flat = data.count(b"{") == 1 and b"[" not in data
    if len(_KEY_END.findall(data)) == (len(obj) if flat else _key_count(obj)):
        return None
    repeated: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: set[str] = set()
        for name, _ in items:
            if name in seen and not repeated:
                repeated.append(name)
            seen.add(name)
        return {}

    json.loads(data, object_pairs_hook=pairs)
    return repeated[0] if repeated else None


def _key_count(value: Any) -> int:
    count, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            count += len(item)
            stack.extend(v for v in item.values() if isinstance(v, dict | list))
        elif isinstance(item, list):
            stack.extend(v for v in item if isinstance(v, dict | list))
    return count


def bounded_context(context: str) -> str:
    """`context`, or its truncated form when longer than MAX_CONTEXT_BYTES of UTF-8."""
    size = len(context.encode("utf-8"))
    return context if size <= MAX_CONTEXT_BYTES else f'{{"_truncated":{{"bytes":{size}}}}}'


def _context(rest: dict[str, Any]) -> str:
    """The view's other fields as compact JSON (the gate let no infinity through), bounded;
    the text json.dumps writes (context_text.py)."""
    return bounded_context(compact_json(rest))


def _view_id(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise RecordError(f"field 'view_id' must be a non-empty string, got {json_type(value)}")
    size = len(value.encode("utf-8"))
    if size > MAX_ID_BYTES:
        raise RecordError(f"field 'view_id' has {size} bytes, more than {MAX_ID_BYTES}")
    return value


def parse_view(value: str | bytes | None, source: Source,
               max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> View | Rejected:
    """One `views` message: view_id (non-empty string), user_id and post_id (integers) and
    ts (epoch ms >= 0) are required; every other field is the sample's context."""
    text = _text(value)
    try:
        obj = _object(value, max_bytes)
        view_id, user_id, post_id, ts = _VIEW.pick(obj)
        view_id = _view_id(view_id)
        context = _context({k: v for k, v in obj.items() if k not in VIEW_FIELDS})
    except RecordError as exc:
        return Rejected(MALFORMED, text, source, str(exc))
    return View(view_id, user_id, post_id, ts, context, source, text or "")


def parse_engagement(
    value: str | bytes | None, source: Source, signals: Sequence[str],
    max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> Engagement | Rejected:
    """One `engagements` message: user_id, post_id (integers), signal (string), ts (epoch ms
    >= 0), view_id absent/null or a non-empty string. A well-formed message whose signal is
    not configured is rejected as `unknown_signal`; other fields are ignored."""
    text = _text(value)
    try:
        obj = _object(value, max_bytes)
        user_id, post_id, ts = _ENGAGEMENT.pick(obj)
        raw_view_id = obj.get("view_id")
        view_id = None if raw_view_id is None else _view_id(raw_view_id)
        signal = obj.get("signal")
        if not isinstance(signal, str):
            raise RecordError(f"field 'signal' must be a string, got {json_type(signal)}")
    except RecordError as exc:
        return Rejected(MALFORMED, text, source, str(exc))
    if signal not in signals:
        return Rejected(UNKNOWN_SIGNAL, text, source,
                        f"signal {signal[:100]!r} is not one of samples.signals")
    return Engagement(user_id, post_id, view_id, signal, ts, text or "", source)
