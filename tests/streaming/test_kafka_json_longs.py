"""The source's reading of top-level integer fields (option jsonLongs): pure, no broker."""

from __future__ import annotations

import json

import pytest

from spark_jobs.streaming.kafka.json_longs import long_columns, top_level_longs

NAMES = ("ts", "user_id")


@pytest.mark.parametrize(("value", "expected"), [
    (b'{"ts": 17, "user_id": -3}', (17, -3)),
    (b'{"user_id": 5}', (None, 5)),
    (b'{"ts": "17"}', (None, None)),  # a numeric string is not an integer
    (b'{"ts": 17.0}', (None, None)),
    (b'{"ts": 1e3}', (None, None)),
    (b'{"ts": true, "user_id": false}', (None, None)),
    (b'{"ts": null}', (None, None)),
    (b'{"ts": 9223372036854775807}', (9223372036854775807, None)),
    (b'{"ts": 9223372036854775808}', (None, None)),  # beyond int64
    (b'{"ts": -9223372036854775808}', (-9223372036854775808, None)),
    (b'{"ts": 1, "ts": 2}', (2, None)),  # the last, as Python's json keeps it
    (b'{"a": {"ts": 3}}', (None, None)),  # top level only
    (b'[{"ts": 4}]', (None, None)),
    (b'17', (None, None)),
    (b'{"ts": 5} trailing', (None, None)),  # not JSON
    (b'\xff{"ts": 5}', (None, None)),  # not UTF-8
    (b'', (None, None)),
    # what orjson takes and the JSON gate refuses still reads (the job dead-letters it)
    (b'{"ts": 5, "x": 99999999999999999999}', (5, None)),
    (b'{"ts": 5, "x": ' + b"[" * 70 + b"]" * 70 + b"}", (5, None)),
    (None, (None, None)),
])
def test_reads_top_level_integers_as_the_jobs_parsers_do(value: bytes | None,
                                                         expected: tuple[int | None, ...]
                                                         ) -> None:
    assert top_level_longs(value, NAMES, 1 << 20) == expected


def test_a_message_beyond_the_size_bound_reads_null() -> None:
    value = json.dumps({"ts": 5, "pad": "x" * 100}).encode()
    assert top_level_longs(value, NAMES, len(value)) == (5, None)
    assert top_level_longs(value, NAMES, len(value) - 1) == (None, None)


def test_columns_line_up_with_messages() -> None:
    values = [b'{"ts": 1, "user_id": 2}', None, b'{"user_id": 4}']
    assert long_columns(values, NAMES, 1 << 20) == [[1, None, None], [2, None, 4]]
    assert long_columns(values, ("ts",), 1 << 20) == [[1, None, None]]
    assert long_columns([], NAMES, 1 << 20) == [[], []]
    assert long_columns(values, (), 1 << 20) == []
