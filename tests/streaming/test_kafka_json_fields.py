"""The source's reading of top-level integer and string fields (options jsonLongs and
jsonStrings): pure, no broker."""

from __future__ import annotations

import json

import pytest

from spark_jobs.streaming.kafka.json_fields import (
    field_columns,
    top_level_fields,
    top_level_longs,
)

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


@pytest.mark.parametrize(("value", "expected"), [
    (b'{"view_id": "v1", "user_id": 3}', (3, "v1")),
    (b'{"view_id": ""}', (None, "")),  # empty is a string (the job's parser refuses it)
    (b'{"view_id": 17, "user_id": "3"}', (None, None)),  # a number is not a string
    (b'{"view_id": ["v"], "user_id": true}', (None, None)),
    (b'{"view_id": {"v": 1}}', (None, None)),
    (b'{"view_id": null}', (None, None)),
    (b'{"view_id": "a", "view_id": "b"}', (None, "b")),  # the last
    (b'{"view_id": "caf\\u00e9 \\"q\\""}', (None, 'caf\u00e9 "q"')),  # unescaped
    (b'{"view_id": "\\ud800"}', (None, None)),  # a lone surrogate: not JSON orjson takes
    (b'{"x": {"view_id": "v"}}', (None, None)),
    (b'"v"', (None, None)),
    (None, (None, None)),
])
def test_reads_top_level_strings_as_the_jobs_parsers_do(
        value: bytes | None, expected: tuple[int | str | None, ...]) -> None:
    assert top_level_fields(value, ("user_id",), ("view_id",), 1 << 20) == expected


def test_columns_line_up_with_messages() -> None:
    values = [b'{"ts": 1, "user_id": 2, "v": "a"}', None, b'{"user_id": 4, "v": 5}']
    assert field_columns(values, NAMES, (), 1 << 20) == [[1, None, None], [2, None, 4]]
    assert field_columns(values, ("ts",), ("v",), 1 << 20) == [[1, None, None],
                                                                 ["a", None, None]]
    assert field_columns([], NAMES, ("v",), 1 << 20) == [[], [], []]
    assert field_columns(values, (), (), 1 << 20) == []
