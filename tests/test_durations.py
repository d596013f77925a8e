"""Duration texts of CONTRACTS.md section 1: `<int><unit>`, ISO 8601, a bare 0, and ints as ms."""

from __future__ import annotations

import random

import pytest

from spark_jobs.config.durations import DurationError, format_duration_ms, parse_duration_ms

SECOND, MINUTE, HOUR, DAY = 1_000, 60_000, 3_600_000, 86_400_000


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("250ms", 250),
        ("90s", 90 * SECOND),
        ("15m", 15 * MINUTE),
        ("2h", 2 * HOUR),
        ("3d", 3 * DAY),
        ("0ms", 0),
        ("0s", 0),
        ("0d", 0),
        ("1ms", 1),
    ],
)
def test_every_unit(text, expected):
    """Each unit of the contract has its exact millisecond factor (m is minutes, not months)."""
    assert parse_duration_ms(text) == expected


@pytest.mark.parametrize("text", [" 15m", "15m ", "\t15m\n", "15 m"])
def test_surrounding_whitespace_is_tolerated(text):
    """YAML and env values often carry stray blanks; they must not change the meaning."""
    assert parse_duration_ms(text) == 15 * MINUTE


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PT15M", 15 * MINUTE),
        ("PT1H30M", 90 * MINUTE),
        ("P3D", 3 * DAY),
        ("P1DT2H", DAY + 2 * HOUR),
        ("PT90S", 90 * SECOND),
        ("PT0.5S", 500),
        ("PT1.25S", 1_250),
        ("P1DT1H1M1S", DAY + HOUR + MINUTE + SECOND),
        ("pt15m", 15 * MINUTE),
        ("PT0S", 0),
    ],
)
def test_iso_8601(text, expected):
    """ISO 8601 durations (as Spark and Java print them) are accepted, case-insensitively."""
    assert parse_duration_ms(text) == expected


@pytest.mark.parametrize("text", ["0", " 0 "])
def test_bare_zero(text):
    """A bare 0 is the one unit-less text allowed (e.g. `lateness: 0`)."""
    assert parse_duration_ms(text) == 0


@pytest.mark.parametrize(("value", "expected"), [(0, 0), (1, 1), (900_000, 900_000)])
def test_ints_are_milliseconds(value, expected):
    """YAML turns `0` or `900000` into an int, which is taken as milliseconds already."""
    assert parse_duration_ms(value) == expected


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "m",
        "15",
        "00",
        "-5m",
        "1.5h",
        "15min",
        "15M",
        "15 minutes",
        "P",
        "PT",
        "P1W",
        "abc",
        "15mm",
        "1e3ms",
        "PT-1M",
        None,
        1.5,
        [15],
        {"m": 15},
    ],
)
def test_rejected_texts_name_the_value_and_the_forms(bad):
    """A wrong duration fails with a message that quotes it and says what to write instead."""
    with pytest.raises(DurationError) as info:
        parse_duration_ms(bad)
    message = str(info.value)
    assert repr(bad) in message or str(bad) in message
    assert "ms, s, m, h or d" in message
    assert "PT15M" in message


@pytest.mark.parametrize("bad", [True, False])
def test_booleans_are_not_durations(bad):
    """`lateness: yes` becomes True in YAML; it must not silently mean 1 ms."""
    with pytest.raises(DurationError, match="not a duration"):
        parse_duration_ms(bad)


def test_negative_int_is_rejected():
    """A negative int from YAML is a mistake, not a zero lateness."""
    with pytest.raises(DurationError, match="negative duration: -5"):
        parse_duration_ms(-5)


def test_duration_error_is_a_value_error():
    """Callers that catch ValueError (CLI argument parsing) also catch duration errors."""
    assert issubclass(DurationError, ValueError)


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "0"),
        (1, "1ms"),
        (999, "999ms"),
        (1_500, "1500ms"),
        (SECOND, "1s"),
        (90 * SECOND, "90s"),
        (MINUTE, "1m"),
        (15 * MINUTE, "15m"),
        (90 * MINUTE, "90m"),
        (HOUR, "1h"),
        (25 * HOUR, "25h"),
        (DAY, "1d"),
        (3 * DAY, "3d"),
    ],
)
def test_format_picks_the_largest_exact_unit(ms, text):
    """Formatting is the shortest exact text, so logs and Spark intervals read naturally."""
    assert format_duration_ms(ms) == text


def test_parse_inverts_format_for_many_values():
    """format then parse is the identity on every non-negative millisecond count."""
    rng = random.Random(1234)
    values = [0, 1, 59_999, 60_000, 3_599_999, 3_600_000, 86_399_999, 86_400_000]
    values += [rng.randrange(0, 10 * DAY) for _ in range(2_000)]
    values += [
        rng.randrange(0, 1_000) * unit for unit in (SECOND, MINUTE, HOUR, DAY) for _ in range(200)
    ]
    for ms in values:
        assert parse_duration_ms(format_duration_ms(ms)) == ms, ms


@pytest.mark.parametrize("text", ["0", "1ms", "90s", "15m", "1h", "3d", "1500ms", "25h"])
def test_format_inverts_parse_for_canonical_texts(text):
    """Canonical texts survive a parse/format round trip unchanged."""
    assert format_duration_ms(parse_duration_ms(text)) == text
