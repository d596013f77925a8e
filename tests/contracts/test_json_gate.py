"""The hostile-input gate every message passes (CONTRACTS section 9): each kind of bad JSON is
refused with a detail naming what is wrong (and the field, where there is one)."""

import pytest

from spark_jobs.contracts.json_gate import MalformedJson, load_json


@pytest.mark.parametrize(("value", "detail"), [
    (b'{"paymentAmount": 1e999999999}', "field 'paymentAmount': number 1e999999999 does not fit"),
    (b'{"a": {"b": -1e400}}', "field 'b': number -1e400 does not fit"),
    (b'{"p": 1e-400}', "field 'p': number 1e-400 does not fit"),
    (b'{"ruleId": 9223372036854775808}', "field 'ruleId': integer 9223372036854775808 is out"),
    (b'{"t": -9223372036854775809}', "field 't': integer -9223372036854775809 is out"),
    (b'{"t": [1, 99999999999999999999]}', "field 't': integer 99999999999999999999 is out"),
    (b'[1e400]', "number 1e400 does not fit"),
    (b'{"k": "\\ud800"}', "not valid JSON: no low surrogate"),
    (b'{"k": "\xff\xfe"}', "not valid JSON: str is not valid UTF-8"),
    (b"[" * 65 + b"]" * 65, "JSON nested deeper than 64 levels"),
    (b'{"a":' * 3000 + b"1" + b"}" * 3000, "not valid JSON"),
    (None, "empty message"),
    (b"", "not valid JSON"),
])
def test_hostile_json_is_refused_with_a_detail(value, detail):
    with pytest.raises(MalformedJson) as refused:
        load_json(value)
    assert str(refused.value).startswith(detail)


def test_a_message_over_the_size_limit_is_refused_before_parsing():
    with pytest.raises(MalformedJson, match=r"larger than jobs\.max_message_bytes"):
        load_json(b'{"pad": "' + b"x" * 100 + b'"}', max_bytes=64)


@pytest.mark.parametrize("value", [
    b'{"ts": 9223372036854775807, "m": -9223372036854775808}',
    b"[" * 64 + b"]" * 64,
    b'{"x": 1e308, "y": 0.0, "z": 0e999, "w": "1e999 and 99999999999999999999 as text"}',
    b'{"d": 0.12345678901234567890123}',
])
def test_extreme_but_valid_json_passes(value):
    load_json(value)
