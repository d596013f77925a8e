"""training_samples on hostile input (CONTRACTS section 9), without Spark: the parsers, the
bounded echo, a record that raises, and hypothesis fuzzing of the per-record path."""

from __future__ import annotations

import json

import pytest
from helpers.hostile import hostile_messages, messages
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_jobs.contracts.json_gate import compact_flat_object
from spark_jobs.samples.core.isolation import add_isolated
from spark_jobs.samples.core.joiner import (
    JoinParameters,
    StepResult,
    UserJoinState,
    add_records,
    advance,
)
from spark_jobs.samples.core.outputs import make_sample
from spark_jobs.samples.core.records import (
    MALFORMED,
    MAX_CONTEXT_BYTES,
    MAX_ID_BYTES,
    UNKNOWN_SIGNAL,
    Engagement,
    Rejected,
    Source,
    View,
    parse_engagement,
    parse_view,
)
from spark_jobs.samples.encoding.sample_avro import SampleEncoder, decode_sample

SIGNALS = ("like", "share", "comment", "favorite", "play", "skip")
PARAMS = JoinParameters(600_000, SIGNALS)
TS = 1_767_225_600_000
VIEW = {"view_id": "v1", "user_id": 42, "post_id": 7, "ts": TS, "surface": "feed",
        "score": 0.5}
ENGAGEMENT = {"user_id": 42, "post_id": 7, "view_id": "v1", "signal": "like", "ts": TS + 5}
VIEW_FIELDS = tuple(VIEW)
ENGAGEMENT_FIELDS = tuple(ENGAGEMENT)
SMALL = 4_096  # jobs.max_message_bytes of these tests
ENCODER = SampleEncoder(SIGNALS)
# a sample on the topic: its two ids, its context, and a few bytes of numbers and labels
MAX_SAMPLE_BYTES = 2 * MAX_ID_BYTES + MAX_CONTEXT_BYTES + 200


def source(topic: str, offset: int = 0) -> Source:
    return Source(topic, 0, offset, TS, "42")


def parse(topic: str, value: bytes | None, offset: int = 0) -> View | Engagement | Rejected:
    if topic == "views":
        return parse_view(value, source(topic, offset), SMALL)
    return parse_engagement(value, source(topic, offset), SIGNALS, SMALL)


def hostile(topic: str) -> list[tuple[str, bytes | None, str]]:
    if topic == "views":
        return hostile_messages(VIEW, int_field="post_id", string_field="surface",
                                time_field="ts", number_field="score",
                                max_message_bytes=SMALL)
    return hostile_messages(ENGAGEMENT, int_field="user_id", string_field="view_id",
                            time_field="ts", max_message_bytes=SMALL)


CASES = [(topic, label, value, reason) for topic in ("views", "engagements")
         for label, value, reason in hostile(topic)]


@pytest.mark.parametrize("topic, label, value, reason", CASES,
                         ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_every_hostile_kind_is_malformed_with_a_detail(topic, label, value, reason):
    record = parse(topic, value)
    if reason == "future":  # the parser keeps it; the processor base dead-letters it
        assert isinstance(record, View | Engagement)
        return
    assert isinstance(record, Rejected) and record.reason == MALFORMED == reason
    assert record.detail
    if label in ("int64 overflow", "far beyond int64", "infinite number", "vanishing number"):
        field = "score" if topic == "views" and "number" in label else (
            "post_id" if topic == "views" else "user_id")
        assert f"field {field!r}" in record.detail, "the detail names the field"
    if label == "huge message":
        assert "jobs.max_message_bytes" in record.detail


def test_a_context_larger_than_the_bound_is_replaced_by_the_truncated_form():
    at_limit = {**VIEW, "pad": "x" * 10}
    size = len(parse_view(json.dumps(at_limit), source("views")).context.encode())
    fits = {**VIEW, "pad": "x" * (10 + MAX_CONTEXT_BYTES - size)}
    view = parse_view(json.dumps(fits), source("views"))
    assert len(view.context.encode()) == MAX_CONTEXT_BYTES
    assert json.loads(view.context)["surface"] == "feed"

    over = {**VIEW, "pad": "é" * MAX_CONTEXT_BYTES}  # 2 bytes each in UTF-8
    view = parse_view(json.dumps(over, ensure_ascii=False), source("views"))
    context = json.dumps({k: v for k, v in over.items() if k not in ("view_id", "user_id",
                                                                    "post_id", "ts")},
                         separators=(",", ":"), ensure_ascii=False)
    assert view.context == f'{{"_truncated":{{"bytes":{len(context.encode())}}}}}'


def test_a_view_id_longer_than_the_bound_is_malformed():
    long_id = "é" * (MAX_ID_BYTES // 2 + 1)
    assert isinstance(parse_view(json.dumps({**VIEW, "view_id": "é" * (MAX_ID_BYTES // 2)}),
                                 source("views")), View)
    view = parse_view(json.dumps({**VIEW, "view_id": long_id}), source("views"))
    engagement = parse_engagement(json.dumps({**ENGAGEMENT, "view_id": long_id}),
                                  source("engagements"), SIGNALS)
    for record in (view, engagement):
        assert isinstance(record, Rejected) and record.reason == MALFORMED
        assert record.detail == f"field 'view_id' has {MAX_ID_BYTES + 2} bytes, more than 1024"


def test_a_repeated_key_anywhere_is_malformed_and_an_escaped_quote_is_not_one():
    nested = '{"view_id":"v","user_id":1,"post_id":2,"ts":3,"ctx":{"a":1,"a":2}}'
    record = parse_view(nested, source("views"))
    assert isinstance(record, Rejected) and record.detail == "field 'a' appears more than once"
    tricky = '{"view_id":"v\\":","user_id":1,"post_id":2,"ts":3,"x":"\\" :"}'
    assert parse_view(tricky, source("views")).context == '{"x":"\\" :"}'


def test_unknown_signal_says_which():
    record = parse_engagement(json.dumps({**ENGAGEMENT, "signal": "dislike"}),
                              source("engagements"), SIGNALS)
    assert (record.reason, record.detail) == (UNKNOWN_SIGNAL,
                                              "signal 'dislike' is not one of samples.signals")


# -- a record that raises ---------------------------------------------------------------------
def _view(view_id, offset: int, ts: int = TS) -> View:
    return View(view_id, 42, 7, ts, "{}", source("views", offset), f"raw {offset}")


def _engagement(signal: str, offset: int, view_id: str | None = None) -> Engagement:
    return Engagement(42, 7, view_id, signal, TS + offset, f"raw {offset}",
                      source("engagements", offset))


def test_a_record_that_raises_is_left_out_and_the_others_land_as_without_it():
    # an unhashable view_id cannot come from the parser, but it does raise inside the join
    bad = _view(["not", "hashable"], 2)
    good = [_view("v1", 1), _view("v2", 3, TS + 10), _engagement("like", 4, "v1"),
            _engagement("share", 5), _view("v1", 6)]
    state = UserJoinState()
    state.views["v0"] = _view("v0", 0, TS - 1)
    step = add_isolated(state, [*good[:1], bad, *good[1:]], TS, PARAMS)
    assert [(record, type(exc)) for record, exc in step.failed] == [(bad, TypeError)]

    expected = UserJoinState()
    expected.views["v0"] = _view("v0", 0, TS - 1)
    reference = add_records(expected, good, TS, PARAMS)
    assert step.result == reference and reference.duplicate_views == 1
    stored = UserJoinState.from_bytes  # what is kept (a view's raw text is not)
    assert stored(step.state.to_bytes()) == stored(expected.to_bytes())
    closed = advance(step.state, TS + 10 + PARAMS.window_ms, PARAMS)
    assert [(s.view_id, dict(s.labels)["like"], dict(s.labels)["share"])
            for s in closed.samples] == [("v0", 0, 0), ("v1", 1, 1), ("v2", 0, 0)]


def test_without_a_failure_the_state_is_the_one_given():
    state = UserJoinState()
    step = add_isolated(state, [_view("v1", 1)], TS, PARAMS)
    assert step.state is state and not step.failed and "v1" in state.views


# -- fuzzing ---------------------------------------------------------------------------------
def _checked_sample(view: View) -> None:
    """An emitted sample always encodes, within the bound, and reads back the same."""
    sample = make_sample(view, SIGNALS, {"like"}).as_dict()
    encoded = ENCODER.encode(sample)
    assert len(encoded) <= MAX_SAMPLE_BYTES
    assert {k: v for k, v in decode_sample(encoded).items() if k != "window_ms"} == sample
    json.loads(view.context)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(messages(VIEW, VIEW_FIELDS), st.binary(max_size=SMALL + 100)))
def test_fuzzed_views_are_a_view_or_a_dead_letter_with_a_reason(value):
    record = parse("views", value)
    if isinstance(record, Rejected):
        assert record.reason == MALFORMED and record.detail
    else:
        assert isinstance(record, View)
        _checked_sample(record)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages(ENGAGEMENT, ENGAGEMENT_FIELDS))
def test_fuzzed_engagements_are_an_engagement_or_a_dead_letter_with_a_reason(value):
    record = parse("engagements", value)
    if isinstance(record, Rejected):
        assert record.reason in (MALFORMED, UNKNOWN_SIGNAL) and record.detail
    else:
        assert isinstance(record, Engagement) and record.signal in SIGNALS


def _valid(draw: st.DrawFn, topic: str) -> bytes:
    """A valid record of one of two posts, ts within a few windows."""
    post = draw(st.sampled_from((7, 8)))
    ts = TS + draw(st.integers(min_value=0, max_value=3 * PARAMS.window_ms))
    if topic == "views":
        return json.dumps({**VIEW, "view_id": f"v{draw(st.integers(0, 5))}", "post_id": post,
                           "ts": ts}).encode()
    view_id = draw(st.one_of(st.none(), st.sampled_from(("v0", "v1", "v2"))))
    return json.dumps({**ENGAGEMENT, "view_id": view_id, "post_id": post, "ts": ts,
                       "signal": draw(st.sampled_from(SIGNALS))}).encode()


@st.composite
def traffic(draw: st.DrawFn) -> list[list[tuple[str, bytes | None]]]:
    """A few micro-batches of one user: valid records interleaved with hostile ones."""
    batches = []
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        batch = []
        for _ in range(draw(st.integers(min_value=0, max_value=8))):
            topic = draw(st.sampled_from(("views", "engagements")))
            kind = draw(st.sampled_from(("valid", "mutated", "hostile")))
            if kind == "valid":
                value = _valid(draw, topic)
            elif kind == "mutated":
                value = draw(messages(VIEW if topic == "views" else ENGAGEMENT,
                                      VIEW_FIELDS if topic == "views" else ENGAGEMENT_FIELDS))
            else:
                value = draw(st.sampled_from(hostile(topic)))[1]
            batch.append((topic, value))
        batches.append(batch)
    return batches


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traffic())
def test_fuzzed_traffic_through_the_join_loses_no_view_and_raises_nothing(batches):
    """Per batch: parse, add (isolated), advance; then close everything. Every view message
    ends as one sample, one duplicate or one dead letter; every sample encodes."""
    state = UserJoinState()
    total = StepResult()
    offset, views = 0, 0
    for number, batch in enumerate(batches):
        records = []
        for topic, value in batch:
            offset += 1
            views += topic == "views"
            records.append(parse(topic, value, offset))
        watermark = TS - PARAMS.window_ms + number * PARAMS.window_ms
        step = add_isolated(state, records, watermark, PARAMS)
        assert not step.failed, "nothing the parser lets through makes the join raise"
        state = step.state
        total.extend(step.result).extend(advance(state, watermark, PARAMS))
    total.extend(advance(state, 2**62, PARAMS))
    assert state.is_empty()
    assert all(d.reason and (d.reason != MALFORMED or d.detail) for d in total.dead_letters)
    dead_views = sum(d.source.topic == "views" for d in total.dead_letters)
    assert len(total.samples) + total.duplicate_views + dead_views == views
    assert len(total.orphans) + len(total.dead_letters) - dead_views <= offset - views
    for sample in total.samples:
        encoded = ENCODER.encode(sample.as_dict())
        assert len(encoded) <= MAX_SAMPLE_BYTES


def _compact(value: bytes) -> bytes:
    """The message as producers write JSON (json.dumps' spaces dropped), so that a flat one
    may take the parsers' shortcut past the gate's scans (json_gate.compact_flat_object)."""
    return value.replace(b", ", b",").replace(b": ", b":")


def _same_on_both_paths(topic: str, value: bytes) -> View | Engagement | Rejected:
    """bytes may take the shortcut; a bytearray of the same message always takes the whole
    gate: both must give the same record or the same dead letter."""
    shortcut, whole = parse(topic, value), parse(topic, bytearray(value))
    assert shortcut == whole, value
    return shortcut


@pytest.mark.parametrize("topic, label, value, reason",
                         [c for c in CASES if c[2] is not None],
                         ids=[f"{c[0]}-{c[1]}" for c in CASES if c[2] is not None])
def test_a_compact_hostile_message_gets_the_same_answer_as_through_the_whole_gate(
        topic, label, value, reason):
    _same_on_both_paths(topic, value)
    _same_on_both_paths(topic, _compact(value))


def test_the_shortcut_takes_compact_flat_messages_and_refuses_a_repeated_key():
    view = _compact(json.dumps(VIEW).encode())
    assert compact_flat_object(view) is not None
    assert isinstance(_same_on_both_paths("views", view), View)
    repeated = b'{"view_id":"v","user_id":1,"post_id":2,"ts":3,"a":1,"a":2}'
    assert compact_flat_object(repeated) is None
    record = _same_on_both_paths("views", repeated)
    assert isinstance(record, Rejected) and record.detail == "field 'a' appears more than once"
    wide = b'{"user_id":18446744073709551615,"post_id":7,"signal":"like","ts":5}'
    record = _same_on_both_paths("engagements", wide)
    assert isinstance(record, Rejected) and "64-bit range" in record.detail


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(messages(VIEW, VIEW_FIELDS), messages(ENGAGEMENT, ENGAGEMENT_FIELDS)),
       st.sampled_from(["views", "engagements"]))
def test_fuzzed_compact_messages_get_the_same_answer_as_through_the_whole_gate(value, topic):
    _same_on_both_paths(topic, _compact(value))
