"""The transaction parser's fast path (keys.exact_from_gate) gives loads_json's result exactly:
every value, its type, and each number's received text."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_jobs.contracts.json_gate import MalformedJson, compact_flat_object
from spark_jobs.fraud.core.keys import (
    JsonDecimal,
    exact_from_gate,
    gated_json,
    loads_json,
)


def _same(a: Any, b: Any) -> bool:
    """Equal values of the same types, numbers with the same received text."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, JsonDecimal):
        return a.text == b.text and a == b
    return a == b


def _check(raw: bytes) -> None:
    text, parsed = gated_json(raw)
    assert text == raw.decode()
    assert _same(parsed, loads_json(text)), raw


def test_compact_transactions_take_the_fast_path_with_exact_numbers() -> None:
    raw = (b'{"transactionId":7,"eventTime":1795000000000,"payeeId":29033,'
           b'"paymentAmount":4.05,"fee":1e-7,"big":1.5e+300,"neg":-0.0,"paymentType":"CSH",'
           b'"flag":true,"none":null}')
    fast = exact_from_gate(orjson.loads(raw), raw)
    assert fast is not None  # the generators' form, orjson's own
    assert _same(fast, loads_json(raw.decode()))
    assert [fast[k].text for k in ("paymentAmount", "fee", "big", "neg")] == [
        "4.05", "1e-7", "1.5e+300", "-0.0"]
    _check(raw)


@pytest.mark.parametrize("raw", [
    b'{"paymentAmount":21.50}',  # a trailing zero orjson would not write
    b'{"paymentAmount":1E5}',
    b'{"paymentAmount":1e5}',
    b'{"paymentAmount":100000.0e0}',
    b'{"paymentAmount": 4.05}',  # a space
    b'{"a":1,"a":2.50}',  # a repeated key
    b'{"s":"caf\\u00e9","x":1.5}',  # an escape orjson writes as the character
    b'{"s":"a\\/b","x":1.5}',
    b'{"nested":{"x":1.5}}',
    b'{"list":[1.5,2]}',
    b'[1.5]',
    b'1.5',
    b'{"x":0.10000000000000001}',  # more digits than the float keeps
    b'{"x":0e-999999999}',
    b'{"fee":1e-07}',  # Python's exponent form, not orjson's
])
def test_anything_orjson_would_not_write_back_is_parsed_again(raw: bytes) -> None:
    decoded = orjson.loads(raw)
    if not isinstance(decoded, dict) or orjson.dumps(decoded) != raw:
        assert exact_from_gate(decoded, raw) is None
    try:
        _check(raw)
    except ValueError as exc:  # the zero with a huge exponent: refused on both paths
        with pytest.raises(type(exc), match=str(exc)[:20]):
            loads_json(raw.decode())


_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.decimals(allow_nan=False, allow_infinity=False, places=2,
                min_value=Decimal("-1e6"), max_value=Decimal("1e6")).map(float),
    st.text(max_size=8))


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.text(max_size=6), _scalars, max_size=6), st.booleans())
def test_the_fast_path_equals_the_exact_parse(fields: dict[str, Any], stdlib: bool) -> None:
    raw = (json.dumps(fields, separators=(",", ":"), ensure_ascii=False).encode()
           if stdlib else orjson.dumps(fields))
    _check(raw)


def test_text_and_buffer_messages_parse_as_bytes_do() -> None:
    raw = b'{"transactionId":"t-1","eventTime":5,"paymentAmount":21.5,"note":"caf\xc3\xa9"}'
    expected = gated_json(raw)
    for same in (raw.decode(), bytearray(raw), memoryview(raw)):
        text, parsed = gated_json(same)
        assert text == expected[0] and _same(parsed, expected[1])
    assert exact_from_gate(orjson.loads(raw), raw.decode()) is not None


def _outcome(raw: bytes | bytearray, max_bytes: int) -> tuple[str, Any]:
    """gated_json's answer, or the gate's refusal as text."""
    try:
        return gated_json(raw, max_bytes)
    except MalformedJson as exc:
        return "refused", str(exc)


def _same_outcome(raw: bytes, max_bytes: int = 1 << 20) -> tuple[str, Any]:
    """The bytes path (which may take compact_flat_object) against a bytearray of the same
    message, which always goes through the whole gate."""
    fast, gated = _outcome(raw, max_bytes), _outcome(bytearray(raw), max_bytes)
    assert fast[0] == gated[0] and _same(fast[1], gated[1]), raw
    return fast


@pytest.mark.parametrize("raw", [
    b'{"x":18446744073709551615}',  # orjson reads up to 2**64 - 1; int64 stops before
    b'{"x":9223372036854775808}',
    b'{"x":-9223372036854775809}',
    b'{"x":1e999}',
    b'{"x":1e-999}',  # vanishes: orjson reads 0.0, writes "0.0"
    b'{"x":5e-324}',
    b'{"x":1.7976931348623157e308}',
    b'{"s":"\\ud800"}',  # a lone surrogate
    b'{"s":"\\udc00\\ud800"}',
    b'\xef\xbb\xbf{"x":1}',  # a BOM
    b'{"x":1}\x00',
    b'{"s":"\xff"}',  # not UTF-8
])
def test_hostile_flat_objects_get_the_gates_answer(raw: bytes) -> None:
    _same_outcome(raw)


def test_the_fast_path_keeps_to_the_size_limit_and_takes_the_generators_form() -> None:
    raw = b'{"transactionId":1,"eventTime":5,"payeeId":9223372036854775807,"paymentAmount":4.05}'
    assert compact_flat_object(raw) is not None
    assert _same_outcome(raw)[0] == raw.decode()
    assert _same_outcome(raw, max_bytes=len(raw))[0] == raw.decode()
    refused, detail = _same_outcome(raw, max_bytes=len(raw) - 1)
    assert refused == "refused" and "larger than jobs.max_message_bytes" in detail
    assert compact_flat_object(b'{"x":18446744073709551615}') is None


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.text(max_size=6), st.one_of(
    _scalars, st.integers(-(2**64), 2**64), st.floats(allow_nan=False, allow_infinity=False)),
    max_size=6))
def test_every_flat_object_gets_the_gates_answer(fields: dict[str, Any]) -> None:
    try:
        raw = orjson.dumps(fields)
    except orjson.JSONEncodeError:  # an integer orjson does not write
        raw = json.dumps(fields, separators=(",", ":"), ensure_ascii=False).encode()
    _same_outcome(raw)
