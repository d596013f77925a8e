"""The gate's shortcut (json_gate.compact_flat_object) answers only for messages the whole
gate (load_json) accepts, and then with the very same object: every parser that takes it
(records.decode_object, the samples parsers, fraud's transactions) keeps the gate's answers."""

from __future__ import annotations

import json
import math
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_jobs.contracts.json_gate import MalformedJson, compact_flat_object, load_json
from spark_jobs.contracts.records import EVENT, RecordError


def _identical(a: Any, b: Any) -> bool:
    """Equal, with the same types and float bits (-0.0 is not 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_identical(a[k], b[k]) for k in a)
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return a == b


def _agrees(raw: bytes, max_bytes: int = 1 << 20) -> dict[str, Any] | None:
    shortcut = compact_flat_object(raw, max_bytes)
    if shortcut is None:
        return None
    assert _identical(shortcut, load_json(raw, max_bytes)), raw  # never a refusal
    return shortcut


@pytest.mark.parametrize("raw", [
    b'{"x":18446744073709551615}',
    b'{"x":9223372036854775808}',
    b'{"x":-9223372036854775809}',
    b'{"x":1e999}',
    b'{"x":1e-999}',
    b'{"x":0.0}',
    b'{"x":-0.0}',
    b'{"x":5e-324}',
    b'{"x":1.7976931348623157e308}',
    b'{"s":"\\ud800"}',
    b'\xef\xbb\xbf{"x":1}',
    b'{"x":1}\x00',
    b'{"s":"\xff"}',
    b'{"a":1,"a":2}',
    b'{"a":{"b":1}}',
    b'{"a":[1]}',
    b'{"a": 1}',
    b'[1]',
    b'1',
    b'{}',
])
def test_hostile_and_odd_messages_are_the_gates_to_answer(raw: bytes) -> None:
    _agrees(raw)


def test_the_shortcut_takes_a_producer_s_message_and_keeps_the_size_limit() -> None:
    raw = b'{"user_id":42,"event_type":"click","ts":1767225600000,"score":0.5,"ok":true}'
    assert _agrees(raw) == json.loads(raw)
    assert compact_flat_object(raw, len(raw)) is not None
    assert compact_flat_object(raw, len(raw) - 1) is None
    with pytest.raises(MalformedJson, match=r"larger than jobs\.max_message_bytes"):
        load_json(raw, len(raw) - 1)
    for refused in (b'{"a":1,"a":2}', b'{"x":18446744073709551615}', b'{"a": 1}'):
        assert compact_flat_object(refused) is None


def test_a_record_spec_gives_the_same_fields_or_refusal_either_way() -> None:
    for raw in (b'{"user_id":42,"event_type":"click","ts":1767225600000}',
                b'{"user_id":18446744073709551615,"event_type":"click","ts":1}',
                b'{"user_id":42,"event_type":"","ts":1}',
                b'{"user_id":42,"event_type":"click","ts":1e3}'):
        outcomes = []
        for value in (raw, bytearray(raw)):  # a bytearray always takes the whole gate
            try:
                outcomes.append(EVENT.decode(value))
            except RecordError as exc:
                outcomes.append(str(exc))
        assert outcomes[0] == outcomes[1], raw


_values = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**64), 2**64),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=2), st.none(),
                                                         max_size=2))


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(st.text(max_size=6), _values, max_size=6), st.booleans())
def test_any_object_gets_the_gates_answer_or_none(fields: dict[str, Any], stdlib: bool) -> None:
    try:
        raw = (json.dumps(fields, separators=(",", ":"), ensure_ascii=False).encode()
               if stdlib else orjson.dumps(fields))
    except (orjson.JSONEncodeError, UnicodeEncodeError):  # beyond what orjson writes
        raw = json.dumps(fields, separators=(",", ":")).encode()
    _agrees(raw)
