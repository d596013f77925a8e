"""The gate's exact number check runs only for a suspect number *literal* (not for digits in a
string), and the gate decides and words every refusal exactly as it did when the first scan
alone chose the messages for the exact check (the oracle below, a copy of that version)."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from spark_jobs.contracts import json_gate
from spark_jobs.contracts.json_gate import (
    DEFAULT_MAX_MESSAGE_BYTES,
    MAX_DEPTH,
    MalformedJson,
    check_depth,
    check_number_literals,
    load_json,
)

_OLD_SUSPECT_NUMBER = re.compile(rb"[0-9](?:[0-9]{18}|[eE][+-]?[0-9]{3})")


def old_load_json(value: bytes | str | None, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> Any:
    """load_json as of main 2a2755c: the exact check for every hit of the first scan."""
    if value is None:
        raise MalformedJson("empty message (null value)")
    data = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else bytes(value)
    if len(data) > max_bytes:
        raise MalformedJson(
            f"message of {len(data)} bytes is larger than jobs.max_message_bytes ({max_bytes})")
    if _OLD_SUSPECT_NUMBER.search(data):
        check_number_literals(data)
    try:
        decoded = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise MalformedJson(f"not valid JSON: {exc}") from None
    if data.count(b"[") + data.count(b"{") > MAX_DEPTH:
        check_depth(decoded)
    return decoded


def outcome(gate: Any, value: bytes | str | None) -> tuple[str, Any]:
    """("ok", the value's repr) or ("refused", the detail); anything else raised propagates."""
    try:
        return "ok", repr(gate(value))
    except MalformedJson as exc:
        return "refused", str(exc)


# -- generated documents ------------------------------------------------------------------
WS = st.sampled_from([b"", b"", b"", b" ", b"\n", b"\t", b"\r\n  ", b" \t"])
DIGITS = st.text("0123456789", min_size=1, max_size=25).map(str.encode)
EDGE_INTS = (b"0", b"999999999999999999", b"1000000000000000000", b"9223372036854775807",
             b"9223372036854775808", b"18446744073709551615", b"18446744073709551616",
             b"12345678901234567890", b"1" * 40)


@st.composite
def numbers(draw: st.DrawFn) -> bytes:
    """Number literals: long integer parts, long fractions (leading zeros: underflow), short
    and long exponents, signs."""
    sign = draw(st.sampled_from([b"", b"-"]))
    int_part = draw(st.one_of(st.just(b"0"), st.sampled_from(EDGE_INTS),
                              st.builds(lambda first, rest: first + rest[:24],
                                        st.sampled_from(b"123456789").map(lambda c: bytes([c])),
                                        st.just(b"") | DIGITS)))
    zeros = draw(st.sampled_from([0, 0, 1, 17, 18, 19, 20, 223, 224, 230, 322, 323, 330, 400])
                 | st.integers(0, 40))
    fraction = draw(st.just(b"") | DIGITS.map(lambda tail: b"." + b"0" * zeros + tail))
    exponent = draw(st.just(b"") | st.builds(
        lambda e, s, d: e + s + d, st.sampled_from([b"e", b"E"]),
        st.sampled_from([b"", b"+", b"-"]),
        st.sampled_from([b"1", b"99", b"100", b"0099", b"308", b"309", b"324", b"325", b"400",
                         b"999", b"99999"])
        | st.text("0123456789", min_size=1, max_size=4).map(str.encode)))
    return sign + int_part + fraction + exponent


STRING_PIECES = st.one_of(
    DIGITS.map(bytes.decode),
    st.sampled_from([":", ",", "[", "]", "{", " ", "\n", "e", "E", "-", "+", ".", '"', "\\",
                     "\u00e9", "\u2028", "\U0001f600", '": ', ", ", "[-"]),
    st.uuids().map(str),
    st.sampled_from(["12345678901234567890", "1e999", "2E-400", "-9223372036854775809",
                     "0." + "0" * 400 + "1", "x1e234"]),
    st.text(max_size=4),
)
STRINGS = st.builds(
    lambda pieces, ascii_only: json.dumps("".join(pieces), ensure_ascii=ascii_only).encode(),
    st.lists(STRING_PIECES, max_size=6), st.booleans())
LEAVES = numbers() | STRINGS | st.sampled_from([b"true", b"false", b"null"])


@st.composite
def arrays(draw: st.DrawFn, inner: st.SearchStrategy[bytes]) -> bytes:
    items = draw(st.lists(inner, max_size=4))
    return b"[" + draw(WS) + b",".join(draw(WS) + item + draw(WS) for item in items) + b"]"


@st.composite
def objects(draw: st.DrawFn, inner: st.SearchStrategy[bytes]) -> bytes:
    pairs = draw(st.lists(st.tuples(STRINGS, inner), max_size=4))
    return b"{" + draw(WS) + b",".join(
        draw(WS) + key + draw(WS) + b":" + draw(WS) + value + draw(WS)
        for key, value in pairs) + b"}"


VALUES = st.recursive(LEAVES, lambda inner: arrays(inner) | objects(inner), max_leaves=12)


@st.composite
def one_number(draw: st.DrawFn) -> bytes:
    """A single number literal (alone, in an array or an object) beside strings whose digits
    the first scan may see: nothing else sends such a message to the exact check."""
    number, first, second = draw(numbers()), draw(STRINGS), draw(STRINGS)
    before, after = draw(WS), draw(WS)
    return draw(st.sampled_from([
        number,
        b"[" + first + b"," + before + number + after + b"," + second + b"]",
        b"{" + first + b":" + before + number + after + b"," + second + b":" + first + b"}",
    ]))
INSERTS = (b"\x0c", b"\x0b", b"\x00", b"\xff", b"\xc2\xa0", b"\xed\xa0\x80", b"\xef\xbb\xbf",
           b"NaN", b"-Infinity", b"Infinity", b",", b"]", b"}", b":", b'"', b"\\ud800", b"01",
           b"1.", b"+1", b".5", b"1e", b" 12345678901234567890", b"0.0001e-999")


@st.composite
def documents(draw: st.DrawFn, values: st.SearchStrategy[bytes]) -> bytes:
    """Mostly valid JSON texts; some broken on purpose (truncated, a byte or token inserted,
    a BOM, nested past the depth limit), where refusal details must agree too."""
    doc = draw(WS) + draw(values) + draw(WS)
    kind = draw(st.sampled_from(["valid"] * 6 + ["truncated", "inserted", "bom", "deep"]))
    if kind == "truncated":
        doc = doc[:draw(st.integers(0, len(doc)))]
    elif kind == "inserted":
        at = draw(st.integers(0, len(doc)))
        doc = doc[:at] + draw(st.sampled_from(INSERTS)) + doc[at:]
    elif kind == "bom":
        doc = b"\xef\xbb\xbf" + doc
    elif kind == "deep":
        levels = draw(st.integers(MAX_DEPTH - 2, MAX_DEPTH + 3))
        doc = b"[" * levels + doc + b"]" * levels
    return doc


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents(VALUES | one_number()), st.booleans())
@example(b'{"id": "1234567890123456789"}', False)
@example(b'{"view_id": "e58d62ac-24f2-468e-8519-72949022', False)  # truncated, uuid "8e-851"
@example(b'{"a": "x1e234", "b": NaN}', False)
@example(b'\xef\xbb\xbf12345678901234567890', False)
@example(b'[' * 65 + b'"1e234"' + b']' * 65, False)
@example(b'[' * 1000 + b'"1e234"' + b']' * 1000, False)  # the stdlib's recursion limit speaks
@example(b'{"s": "a:1234567890123456789"}', True)
@example(b'{"s": "x\\": 12345678901234567890"}', False)
def test_the_gate_decides_and_words_like_the_exact_check_for_every_first_scan_hit(
        doc: bytes, as_text: bool):
    assert_same_outcome(doc, as_text)


@settings(max_examples=1000, deadline=None)
@given(documents(one_number()), st.booleans())
def test_a_lone_literal_among_digit_strings_is_decided_alike(doc: bytes, as_text: bool):
    assert_same_outcome(doc, as_text)


def assert_same_outcome(doc: bytes, as_text: bool) -> None:
    """The gate and the oracle agree on `doc` (as bytes, or as text when it decodes)."""
    value: bytes | str = doc
    if as_text:
        value = doc.decode("utf-8", "surrogatepass") if _decodes(doc) else doc
    expected = outcome(old_load_json, value)
    assert outcome(load_json, value) == expected
    literal = bool(json_gate._SUSPECT_LITERAL.search(doc)
                   or json_gate._SUSPECT_FIRST_LITERAL.match(doc))
    event(f"first scan hit: {_OLD_SUSPECT_NUMBER.search(doc) is not None}, "
          f"suspect literal: {literal}")
    event(expected[0] if expected[0] == "ok" else next(
        (kind for kind in ("64-bit range", "64-bit float", "not valid JSON", "nested",
                           "not a JSON number") if kind in expected[1]), expected[1]))


def _decodes(data: bytes) -> bool:
    try:
        data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return False
    return True


@pytest.mark.parametrize(("doc", "expected"), [
    (b'{"id": "1234567890123456789"}', ("ok", "{'id': '1234567890123456789'}")),
    (b'{"ts": 9223372036854775807}', ("ok", "{'ts': 9223372036854775807}")),
    (b'{"ts": -9223372036854775808}', ("ok", "{'ts': -9223372036854775808}")),
    (b'{"ts": 9223372036854775808}',
     ("refused", "field 'ts': integer 9223372036854775808 is out of the 64-bit range")),
    (b'{"ts": -9223372036854775809}',
     ("refused", "field 'ts': integer -9223372036854775809 is out of the 64-bit range")),
    (b'{"x": 1e999}', ("refused", "field 'x': number 1e999 does not fit a 64-bit float")),
    (b'{"x": 1e-999}', ("refused", "field 'x': number 1e-999 does not fit a 64-bit float")),
    (b'{"x": 1E+400}', ("refused", "field 'x': number 1E+400 does not fit a 64-bit float")),
    (b'{"x": 0e999}', ("ok", "{'x': 0.0}")),
    (b'{"x": 1e-300}', ("ok", "{'x': 1e-300}")),
    (b'{"x": 0.' + b"0" * 400 + b'1}', ("refused", "field 'x': number 0." + "0" * 38
                                        + "... (403 characters) does not fit a 64-bit float")),
    (b'[-0.' + b"0" * 400 + b'1]', ("refused", "number -0." + "0" * 37
                                    + "... (404 characters) does not fit a 64-bit float")),
    (b'{"x": 0.' + b"0" * 300 + b'1}', ("ok", "{'x': 1e-301}")),
    (b"1" * 400 + b".5", ("refused", "number " + "1" * 40
                          + "... (402 characters) does not fit a 64-bit float")),
    (b"12345678901234567890",
     ("refused", "integer 12345678901234567890 is out of the 64-bit range")),
    (b" \r\n\t-12345678901234567890 ",
     ("refused", "integer -12345678901234567890 is out of the 64-bit range")),
    (b'{"a":\n\t 12345678901234567890}',
     ("refused", "field 'a': integer 12345678901234567890 is out of the 64-bit range")),
    (b'[1,\r\n  -1e-400]', ("refused", "number -1e-400 does not fit a 64-bit float")),
    (b'{"a": "x1e234", "b": NaN}', ("refused", "NaN is not a JSON number")),
    (b'\xef\xbb\xbf12345678901234567890',
     ("refused", "integer 12345678901234567890 is out of the 64-bit range")),
    (b'{"view_id": "e58d62ac-24f2-468e-8519-72949022', ("refused", "not valid JSON: "
                                                       "Unterminated string starting at: "
                                                       "line 1 column 13 (char 12)")),
])
def test_examples_keep_their_decision_and_detail(doc, expected):
    assert outcome(load_json, doc) == expected
    assert outcome(old_load_json, doc) == expected


@pytest.fixture
def exact_checks(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every message the gate hands to the exact (standard library) number check."""
    calls: list[bytes] = []

    def counted(data: bytes) -> None:
        calls.append(data)
        check_number_literals(data)

    monkeypatch.setattr(json_gate, "check_number_literals", counted)
    return calls


@pytest.mark.parametrize("doc", [
    b'{"user_id": 7, "id": "1234567890123456789", "ts": 1764000000000}',
    b'{"user_id":7,"post_id":7005971,"view_id":"e58d62ac-24f2-468e-8519-72949022aa01",'
    b'"signal":"like","ts":1764000000000}',  # "8e-851" in a uuid: the first scan's usual hit
    b'{"note": "1e999 and 99999999999999999999 as text", "n": 1}',
])
def test_digits_only_inside_strings_take_the_fast_path(doc, exact_checks):
    assert load_json(doc) == orjson.loads(doc)
    assert _OLD_SUSPECT_NUMBER.search(doc)  # the first scan alone sent these to the exact check
    assert exact_checks == []


@pytest.mark.parametrize("doc", [
    b'{"id": 1234567890123456789}', b'[1, 2e-308]', b'{"s": "a:1234567890123456789"}'])
def test_a_suspect_literal_still_gets_the_exact_check(doc, exact_checks):
    load_json(doc)
    assert exact_checks == [doc]


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents(VALUES | one_number()) | st.binary(max_size=60))
@example(b"1e-999")
@example(b"[-1234567890123456789]")
@example(b'{"a":-0.0000000000000000001}')
@example(b'{"a": 1E+400}')
def test_the_cheap_look_before_the_scans_misses_no_suspect_literal(doc: bytes):
    """may_hold_suspect_literal is a necessary condition of the two scans: whatever they
    find, it finds too (so skipping them when it finds nothing decides alike)."""
    scanned = bool(json_gate._SUSPECT_LITERAL.search(doc)
                   or json_gate._SUSPECT_FIRST_LITERAL.match(doc))
    event(f"suspect literal: {scanned}")
    if scanned:
        assert json_gate.may_hold_suspect_literal(doc)


@pytest.mark.parametrize(("doc", "looks_suspect"), [
    (b'{"transactionId":1,"eventTime":1767225600000,"paymentAmount":4.05}', False),
    (b'[123456789012345678, 1e99, -2E-12]', False),  # 18 digits, 2-digit exponents
    (b'{"view_id":"e58d62ac-24f2-468e-8519-72949022"}', True),  # "8e-851" in a string
    (b'[1234567890123456789]', True),
])
def test_the_cheap_look_clears_ordinary_messages(doc: bytes, looks_suspect: bool):
    """The look saves the scans only where it clears a message; a string can still trip it
    (the scans then decide, as before)."""
    assert json_gate.may_hold_suspect_literal(doc) is looks_suspect
