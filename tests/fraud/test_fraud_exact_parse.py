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

from spark_jobs.fraud.core.keys import JsonDecimal, exact_from_gate, gated_json, loads_json


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
