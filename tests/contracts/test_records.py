"""Strict decoding of topic messages (CONTRACTS.md section 2): decode or a one-line reason."""

from __future__ import annotations

import orjson
import pytest

from spark_jobs.contracts.records import (
    ACTIVATION,
    EVENT,
    FILTERED_ACTIVATION,
    FILTERED_EVENT,
    SPECS,
    RecordError,
    decode_object,
    spec_for,
)

TS = 1_767_225_600_000
EVENT_OBJ = {"user_id": 42, "event_type": "click", "ts": TS}
ACTIVATION_OBJ = {
    "user_id": 42,
    "experiment_hash": "exp_a",
    "experiment_group": "treatment",
    "ts": TS,
}


def event(**changes) -> bytes:
    obj = {**EVENT_OBJ, **changes}
    return orjson.dumps({k: v for k, v in obj.items() if v is not ...})


def reason(spec, value) -> str:
    with pytest.raises(RecordError) as info:
        spec.decode(value)
    message = str(info.value)
    assert "\n" not in message, "dead-letter reasons are one line"
    return message


# -- valid ------------------------------------------------------------------------------
def test_event_decodes_in_field_order():
    """The contract's example event decodes to (user_id, event_type, ts)."""
    assert EVENT.decode(orjson.dumps(EVENT_OBJ)) == (42, "click", TS)
    assert EVENT.field_names == ("user_id", "event_type", "ts")


def test_activation_decodes_in_field_order():
    """Activations decode to (user_id, experiment_hash, experiment_group, ts)."""
    assert ACTIVATION.decode(orjson.dumps(ACTIVATION_OBJ)) == (42, "exp_a", "treatment", TS)


def test_str_values_and_whitespace_are_accepted():
    """Kafka values may reach us as text; JSON whitespace is irrelevant."""
    text = ' {\n "ts": 5, "event_type": "save" , "user_id": 7 }\n'
    assert EVENT.decode(text) == (7, "save", 5)


def test_extra_fields_are_ignored():
    """Producers add fields freely (`...any other fields`); they must not cause dead letters."""
    value = orjson.dumps({**EVENT_OBJ, "device": "ios", "props": {"a": [1]}, "x": None})
    assert EVENT.decode(value) == (42, "click", TS)


def test_filtered_activation_has_ramp_time_and_control_flag():
    """The filter job's output adds group_ramp_time (long) and is_control (bool)."""
    obj = {**ACTIVATION_OBJ, "group_ramp_time": TS - 5, "is_control": False}
    assert FILTERED_ACTIVATION.decode(orjson.dumps(obj)) == (
        42,
        "exp_a",
        "treatment",
        TS,
        TS - 5,
        False,
    )
    assert FILTERED_EVENT.fields == EVENT.fields


@pytest.mark.parametrize("value", [-(2**63), 2**63 - 1, 0, -1])
def test_64_bit_bounds_are_accepted(value):
    """Every signed 64-bit value is a valid long (Spark LongType), the bounds included."""
    assert EVENT.decode(event(user_id=value)) == (value, "click", TS)


def test_unicode_strings_survive():
    """Event types and group names are UTF-8 text, not just ASCII."""
    assert EVENT.decode(event(event_type="café ☕")) == (42, "café ☕", TS)


# -- errors -----------------------------------------------------------------------------
def test_null_value_is_an_empty_message():
    """A tombstone (null value) is a dead letter, not a crash."""
    assert reason(EVENT, None) == "empty message (null value)"


@pytest.mark.parametrize(
    "value", [b"", b"not json", b'{"user_id": 1,', b"\xff\xfe", b"{'a': 1}", b'{"user_id": NaN}']
)
def test_invalid_json(value):
    """Bytes that are not JSON (or not UTF-8) are rejected as such."""
    assert reason(EVENT, value).startswith("not valid JSON")


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (b"[1, 2]", "list"),
        (b'"text"', "str"),
        (b"42", "int"),
        (b"null", "NoneType"),
        (b"true", "bool"),
    ],
)
def test_non_object_json(value, kind):
    """Valid JSON that is not an object names what it got."""
    assert reason(EVENT, value) == f"not a JSON object: got {kind}"


def test_decode_object_returns_the_whole_object():
    """decode_object keeps every field so callers can pick several specs from one decode."""
    obj = decode_object(orjson.dumps({**EVENT_OBJ, "extra": 1}))
    assert obj["extra"] == 1
    assert EVENT.pick(obj) == (42, "click", TS)


@pytest.mark.parametrize("name", ["user_id", "event_type", "ts"])
def test_missing_field_is_named(name):
    """Each missing field is named in the reason."""
    assert reason(EVENT, event(**{name: ...})) == f"missing field {name!r}"


@pytest.mark.parametrize("name", ["user_id", "event_type", "ts"])
def test_null_field_counts_as_missing(name):
    """A null field is as unusable as an absent one and is named the same way."""
    assert reason(EVENT, event(**{name: None})) == f"missing field {name!r}"


def test_first_problem_in_field_order_is_reported():
    """With several problems the reason is deterministic: the first field in spec order."""
    assert reason(EVENT, b'{"ts": "x"}') == "missing field 'user_id'"


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"user_id": "42"}, "field 'user_id' must be an integer, got string"),
        ({"user_id": True}, "field 'user_id' must be an integer, got boolean"),
        ({"user_id": False}, "field 'user_id' must be an integer, got boolean"),
        ({"user_id": 42.0}, "field 'user_id' must be an integer, got number"),
        ({"user_id": 4.2}, "field 'user_id' must be an integer, got number"),
        ({"ts": [TS]}, "field 'ts' must be an integer, got array"),
        ({"ts": {"ms": TS}}, "field 'ts' must be an integer, got object"),
        ({"event_type": 5}, "field 'event_type' must be a string, got number"),
        ({"event_type": True}, "field 'event_type' must be a string, got boolean"),
        ({"event_type": ["click"]}, "field 'event_type' must be a string, got array"),
    ],
)
def test_wrong_type_names_field_and_json_type(changes, expected):
    """Booleans are not ints and 42.0 is not an int: Spark would silently coerce both."""
    assert reason(EVENT, event(**changes)) == expected


def test_float_written_as_exponent_is_not_an_integer():
    """`1e3` is a JSON number but a float, so it is refused as a user_id."""
    assert "must be an integer" in reason(EVENT, b'{"user_id": 1e3, "event_type": "c", "ts": 1}')


def test_empty_string_is_refused():
    """An empty event type or group name would form a bogus metric key."""
    assert reason(EVENT, event(event_type="")) == "field 'event_type' must not be empty"
    obj = {**ACTIVATION_OBJ, "experiment_group": ""}
    assert reason(ACTIVATION, orjson.dumps(obj)) == "field 'experiment_group' must not be empty"


@pytest.mark.parametrize("text", ["9223372036854775808", "18446744073709551615"])
def test_out_of_64_bit_range_is_refused(text):
    """A long that Spark cannot hold is a dead letter, not an overflow."""
    value = b'{"user_id": 1, "event_type": "c", "ts": ' + text.encode() + b"}"
    assert reason(EVENT, value).startswith("field 'ts'")
    assert reason(EVENT, value).endswith("is out of the 64-bit range")


@pytest.mark.parametrize("text", ["-9223372036854775809", "18446744073709551616", "1" * 40])
def test_far_out_of_range_is_still_refused(text):
    """Beyond 64 bits the JSON parser yields a float; the message is still refused."""
    value = b'{"user_id": ' + text.encode() + b', "event_type": "c", "ts": 1}'
    assert "'user_id'" in reason(EVENT, value)


def test_is_control_must_be_a_boolean():
    """is_control 1/0 is refused rather than guessed."""
    obj = {**ACTIVATION_OBJ, "group_ramp_time": TS, "is_control": 1}
    assert reason(FILTERED_ACTIVATION, orjson.dumps(obj)) == (
        "field 'is_control' must be a boolean, got number"
    )


def test_record_error_is_a_value_error():
    """Callers may catch ValueError generally."""
    assert issubclass(RecordError, ValueError)


# -- spec lookup ------------------------------------------------------------------------
def test_spec_for_every_topic():
    """Every topic name resolves to its spec."""
    for name, spec in SPECS.items():
        assert spec_for(name) is spec
    assert set(SPECS) == {
        "events",
        "experiment_activations",
        "filtered_events",
        "filtered_experiment_activations",
    }


def test_spec_for_unknown_name_lists_the_known_ones():
    """A typo in a topic name fails with the valid choices."""
    with pytest.raises(ValueError, match=r"no record spec 'evnts'.*events"):
        spec_for("evnts")


def test_event_time_outside_epoch_millisecond_range_is_rejected():
    """ts would overflow Spark's timestamp conversion or push the watermark years ahead."""
    from spark_jobs.contracts.records import EVENT, MAX_TIME_MS

    assert EVENT.decode(f'{{"user_id": 1, "event_type": "click", "ts": {MAX_TIME_MS}}}')
    for ts in (-1, MAX_TIME_MS + 1, 9223372036854775807, 1_767_225_600_000_000):
        with pytest.raises(RecordError, match="epoch time in milliseconds"):
            EVENT.decode(f'{{"user_id": 1, "event_type": "click", "ts": {ts}}}')
