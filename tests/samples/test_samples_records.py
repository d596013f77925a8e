"""Decoding of `views` and `engagements` messages for training_samples (no Spark)."""

from __future__ import annotations

import json

import pytest

from spark_jobs.samples.core.records import (
    MALFORMED,
    UNKNOWN_SIGNAL,
    Engagement,
    Rejected,
    Source,
    View,
    parse_engagement,
    parse_view,
)

SIGNALS = ("like", "share", "comment", "favorite", "play", "skip")
VIEWS = Source("views", 0, 5, 1_000, "42")
ENGAGEMENTS = Source("engagements", 1, 9, 2_000, None)
TS = 1_767_225_600_000
VIEW_OBJ = {"view_id": "v1", "user_id": 42, "post_id": 7, "ts": TS}
ENGAGEMENT_OBJ = {"user_id": 42, "post_id": 7, "view_id": "v1", "signal": "like", "ts": TS}


def rejected(record) -> tuple:
    """A Rejected without its detail (checked where the field matters)."""
    assert isinstance(record, Rejected), record
    assert record.detail, "every rejection says why"
    return (record.reason, record.raw, record.source)


def text(obj: dict, **changes) -> str:
    """obj with changes applied; a change to ... removes the field."""
    merged = {**obj, **changes}
    return json.dumps({k: v for k, v in merged.items() if v is not ...})


# -- views ----------------------------------------------------------------------------------
def test_view_decodes_with_context_in_received_order():
    raw = '{"surface":"feed","view_id":"v1","user_id":42,"rank":3,"post_id":7,"ts":5,"é":"ü"}'
    view = parse_view(raw.encode(), VIEWS)
    assert view == View("v1", 42, 7, 5, '{"surface":"feed","rank":3,"é":"ü"}', VIEWS, raw)


def test_view_without_context_has_empty_object():
    view = parse_view(text(VIEW_OBJ), VIEWS)
    assert isinstance(view, View)
    assert view.context == "{}"


def test_view_context_keeps_nested_values_compactly():
    view = parse_view(text(VIEW_OBJ, ctx={"a": [1, 2.5, None, True]}, b="x"), VIEWS)
    assert isinstance(view, View)
    assert view.context == '{"ctx":{"a":[1,2.5,null,true]},"b":"x"}'


@pytest.mark.parametrize(
    "field, value",
    [
        ("view_id", ...), ("view_id", None), ("view_id", ""), ("view_id", 1),
        ("user_id", ...), ("user_id", None), ("user_id", "42"), ("user_id", 42.0),
        ("user_id", True), ("user_id", 2**63),
        ("post_id", ...), ("post_id", None), ("post_id", "7"), ("post_id", 7.5),
        ("post_id", False),
        ("ts", ...), ("ts", None), ("ts", -1), ("ts", 1.5), ("ts", "5"), ("ts", True),
        ("ts", 10**16),
    ],
)
def test_invalid_view_field_is_malformed(field, value):
    raw = text(VIEW_OBJ, **{field: value})
    result = parse_view(raw, VIEWS)
    assert rejected(result) == (MALFORMED, raw, VIEWS)
    assert repr(field) in result.detail, "the detail names the field"


def test_view_ts_zero_is_valid():
    view = parse_view(text(VIEW_OBJ, ts=0), VIEWS)
    assert isinstance(view, View)
    assert view.ts == 0


@pytest.mark.parametrize(
    "raw", ["", "not json", "[1,2]", "42", "null", '"v1"', '{"view_id":"v1"', "{'a':1}"]
)
def test_non_object_text_is_malformed(raw):
    assert rejected(parse_view(raw, VIEWS)) == (MALFORMED, raw, VIEWS)
    assert rejected(parse_engagement(raw, ENGAGEMENTS, SIGNALS)) == (MALFORMED, raw, ENGAGEMENTS)


def test_nan_is_not_json():
    raw = text(VIEW_OBJ)[:-1] + ',"score":NaN}'
    assert rejected(parse_view(raw, VIEWS)) == (MALFORMED, raw, VIEWS)


def test_lone_surrogate_in_context_is_malformed():
    raw = text(VIEW_OBJ)[:-1] + ',"x":"\\ud800"}'
    assert rejected(parse_view(raw, VIEWS)) == (MALFORMED, raw, VIEWS)


def test_null_value_is_malformed_without_text():
    assert rejected(parse_view(None, VIEWS)) == (MALFORMED, None, VIEWS)
    assert rejected(parse_engagement(None, ENGAGEMENTS, SIGNALS)) == (MALFORMED, None,
                                                                      ENGAGEMENTS)


def test_non_utf8_bytes_are_malformed_with_replaced_text():
    raw = b'{"view_id":"v\xff","user_id":42,"post_id":7,"ts":5}'
    expected = '{"view_id":"v\ufffd","user_id":42,"post_id":7,"ts":5}'
    assert rejected(parse_view(raw, VIEWS)) == (MALFORMED, expected, VIEWS)
    eng = b'{"user_id":42,"post_id":7,"signal":"like\xc3","ts":5}'
    result = parse_engagement(eng, ENGAGEMENTS, SIGNALS)
    assert rejected(result) == (MALFORMED, eng.decode("utf-8", "replace"), ENGAGEMENTS)


def test_bytes_like_values_are_accepted():
    raw = text(VIEW_OBJ).encode()
    assert isinstance(parse_view(bytearray(raw), VIEWS), View)
    assert isinstance(parse_view(memoryview(raw), VIEWS), View)


# -- engagements ----------------------------------------------------------------------------
def test_engagement_decodes_and_keeps_received_text():
    raw = text(ENGAGEMENT_OBJ, extra={"a": 1})
    assert parse_engagement(raw.encode(), ENGAGEMENTS, SIGNALS) == Engagement(
        42, 7, "v1", "like", TS, raw, ENGAGEMENTS
    )


@pytest.mark.parametrize("view_id", [None, ...])
def test_engagement_view_id_may_be_null_or_absent(view_id):
    engagement = parse_engagement(text(ENGAGEMENT_OBJ, view_id=view_id), ENGAGEMENTS, SIGNALS)
    assert isinstance(engagement, Engagement)
    assert engagement.view_id is None


@pytest.mark.parametrize(
    "field, value",
    [
        ("view_id", ""), ("view_id", 1), ("view_id", ["v1"]),
        ("user_id", ...), ("user_id", None), ("user_id", "42"), ("user_id", 1.0),
        ("user_id", True),
        ("post_id", ...), ("post_id", None), ("post_id", "7"), ("post_id", False),
        ("signal", ...), ("signal", None), ("signal", 1), ("signal", ["like"]),
        ("ts", ...), ("ts", None), ("ts", -5), ("ts", 2.0), ("ts", False),
    ],
)
def test_invalid_engagement_field_is_malformed(field, value):
    raw = text(ENGAGEMENT_OBJ, **{field: value})
    result = parse_engagement(raw, ENGAGEMENTS, SIGNALS)
    assert rejected(result) == (MALFORMED, raw, ENGAGEMENTS)
    assert repr(field) in result.detail, "the detail names the field"


@pytest.mark.parametrize("signal", ["dislike", "", "Like"])
def test_unconfigured_signal_is_unknown_signal(signal):
    raw = text(ENGAGEMENT_OBJ, signal=signal)
    assert rejected(parse_engagement(raw, ENGAGEMENTS, SIGNALS)) == (
        UNKNOWN_SIGNAL, raw, ENGAGEMENTS
    )


def test_malformed_wins_over_unknown_signal():
    raw = text(ENGAGEMENT_OBJ, signal="dislike", ts=-1)
    assert parse_engagement(raw, ENGAGEMENTS, SIGNALS).reason == MALFORMED


def test_signals_come_from_configuration():
    raw = text(ENGAGEMENT_OBJ, signal="dislike")
    assert isinstance(parse_engagement(raw, ENGAGEMENTS, ["dislike"]), Engagement)
    assert parse_engagement(text(ENGAGEMENT_OBJ), ENGAGEMENTS, ["dislike"]).reason == (
        UNKNOWN_SIGNAL
    )


def test_source_order_is_topic_partition_offset():
    assert VIEWS.order == ("views", 0, 5)


def test_numbers_json_cannot_hold_and_repeated_keys_are_malformed():
    source = Source("views", 0, 0, 0, None)
    huge = '{"view_id": "v", "user_id": 1, "post_id": 2, "ts": 3, "score": 1e400}'
    twice = '{"view_id": "v", "user_id": 1, "user_id": 2, "post_id": 2, "ts": 3}'
    assert rejected(parse_view(huge, source)) == ("malformed", huge, source)
    assert rejected(parse_view(twice, source)) == ("malformed", twice, source)
    assert parse_view(twice, source).detail == "field 'user_id' appears more than once"
    engagement = '{"user_id": 1, "post_id": 2, "signal": "like", "signal": "skip", "ts": 3}'
    assert parse_engagement(engagement, source, ["like", "skip"]).reason == "malformed"
