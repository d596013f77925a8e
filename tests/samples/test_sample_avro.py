"""Training samples in Avro: the repo schemas, the wire format, evolution and clear errors."""

from __future__ import annotations

import json
import struct

import fastavro
import pytest

from spark_jobs.samples.encoding.registry import (
    SampleSchemaError,
    SchemaCompatibilityError,
    SchemaVersion,
    check_compatible,
    check_reads,
    get_schema,
    latest_version,
    schema_versions,
)
from spark_jobs.samples.encoding.sample_avro import (
    DEFAULT_SIGNALS,
    SampleDecoder,
    SampleEncoder,
    SampleEncodingError,
    SignalsMismatchError,
    WireFormatError,
    decode_sample,
    encode_sample,
    schema_for_signals,
    writer_version,
)

CONTEXT = json.dumps({"surface": "for_you", "caption": "café ☕ ñandú 東京 🎉", "position": 3,
                      "model_score": 0.734129}, separators=(",", ":"), ensure_ascii=False)


def sample(**changes):
    base = {"sample_id": "v-1", "view_id": "v-1", "user_id": 42, "post_id": 7,
            "ts": 1_767_225_600_123, "context": CONTEXT,
            "labels": {"like": 1, "share": 0, "comment": 0, "favorite": 0, "play": 1,
                       "skip": 0}}
    return {**base, **changes}


def test_the_schema_files_parse_and_are_numbered_without_gaps():
    versions = schema_versions()
    assert list(versions) == list(range(1, latest_version() + 1))
    assert latest_version() >= 2
    for number, schema in versions.items():
        assert schema.filename == f"training_sample.v{number}.avsc"
        assert schema.parsed["name"] == "tideline.samples.TrainingSample"
        assert schema.fields[:7] == ("sample_id", "view_id", "user_id", "post_id", "ts",
                                     "context", "labels")
        fastavro.parse_schema(json.loads(schema.text))
    assert versions[1].labels == versions[2].labels == DEFAULT_SIGNALS
    assert versions[2].fields[7:] == ("window_ms",)
    assert versions[2].optional_fields == {"window_ms": None}


def test_every_version_is_backward_and_forward_compatible_with_the_one_before():
    for version in range(2, latest_version() + 1):
        check_compatible(version - 1, version)


def evolved(change) -> SchemaVersion:
    """A would-be v3: v1's schema with `change` applied to its JSON."""
    v1 = get_schema(1)
    raw = json.loads(v1.text)
    change(raw)
    return SchemaVersion(3, "training_sample.v3.avsc", json.dumps(raw),
                         fastavro.parse_schema(raw), v1.labels)


def test_the_compatibility_checker_accepts_a_new_label_with_a_default():
    def add_label(raw):
        labels = next(f for f in raw["fields"] if f["name"] == "labels")["type"]
        labels["fields"].append({"name": "save", "type": "int", "default": 0})

    newer = evolved(add_label)
    check_reads(get_schema(1), newer)  # backward: old samples get save = 0
    check_reads(newer, get_schema(1))  # forward: the old reader skips it


def test_the_compatibility_checker_catches_a_required_new_field_and_says_why():
    broken = evolved(lambda raw: raw["fields"].append({"name": "window_ms", "type": "long"}))
    check_reads(broken, get_schema(1))  # forward: the old reader ignores it
    with pytest.raises(SchemaCompatibilityError,
                       match=r"v3.avsc cannot read samples written with training_sample.v1.avsc: "
                             r"reader_field_missing_default_value: window_ms \(at /fields/7\)"):
        check_reads(get_schema(1), broken)


def test_the_compatibility_checker_catches_a_changed_type_in_both_directions():
    def user_id_as_string(raw):
        next(f for f in raw["fields"] if f["name"] == "user_id")["type"] = "string"

    broken = evolved(user_id_as_string)
    reason = r"type_mismatch: reader type: \w+ not compatible with writer type: \w+ \(at /fields/2"
    for writer, reader in ((get_schema(1), broken), (broken, get_schema(1))):
        with pytest.raises(SchemaCompatibilityError, match=reason):
            check_reads(writer, reader)


def test_round_trip_v2_with_unicode_context():
    encoder = SampleEncoder(DEFAULT_SIGNALS, defaults={"window_ms": 600_000})
    data = encoder.encode(sample())
    assert data[:5] == b"\x00" + struct.pack(">I", 2)
    assert writer_version(data) == encoder.version == 2
    decoded = SampleDecoder(2).decode(data)
    assert decoded == {**sample(), "window_ms": 600_000}
    assert json.loads(decoded["context"])["caption"] == "café ☕ ñandú 東京 🎉"
    assert list(decoded["labels"]) == list(DEFAULT_SIGNALS)


def test_a_sample_may_carry_window_ms_itself_and_it_defaults_to_null():
    encoder = SampleEncoder()
    assert decode_sample(encoder.encode(sample()))["window_ms"] is None
    assert decode_sample(encoder.encode(sample(window_ms=5)))["window_ms"] == 5


def test_the_encoder_reuses_its_buffer_without_leaking_bytes_between_samples():
    encoder = SampleEncoder()
    long_one = encoder.encode(sample(context=CONTEXT * 20))
    short = encoder.encode(sample())
    assert len(short) < len(long_one)
    assert decode_sample(short) == {**sample(), "window_ms": None}
    assert decode_sample(long_one)["context"] == CONTEXT * 20


def test_v1_bytes_read_with_v2_have_window_ms_none():
    data = SampleEncoder(version=1).encode(sample())
    assert writer_version(data) == 1
    assert SampleDecoder(2).decode(data) == {**sample(), "window_ms": None}
    assert SampleDecoder(1).decode(data) == sample()


def test_v2_bytes_read_with_v1_drop_window_ms():
    data = encode_sample(sample(window_ms=600_000))
    assert decode_sample(data, reader_version=1) == sample()


def test_wrong_magic_byte_is_a_clear_error():
    data = bytearray(encode_sample(sample()))
    data[0] = 1
    with pytest.raises(WireFormatError, match="not the Confluent magic byte 0"):
        decode_sample(bytes(data))
    with pytest.raises(WireFormatError, match="magic byte"):
        decode_sample(json.dumps(sample()).encode())
    with pytest.raises(WireFormatError, match="too short"):
        decode_sample(b"\x00\x00")


def test_unknown_version_is_a_clear_error():
    body = encode_sample(sample())[5:]
    with pytest.raises(WireFormatError, match=r"unknown TrainingSample schema version 99; "
                                              r"this build knows 1, 2"):
        decode_sample(b"\x00" + struct.pack(">I", 99) + body)
    with pytest.raises(SampleSchemaError, match="unknown TrainingSample schema version 7"):
        SampleDecoder(7)


def test_truncated_or_mislabelled_bytes_are_clear_errors():
    data = encode_sample(sample())
    with pytest.raises(WireFormatError, match="cannot read a v2 TrainingSample"):
        decode_sample(data[:-10])
    v1_body = SampleEncoder(version=1).encode(sample())[5:]
    relabelled = b"\x00" + struct.pack(">I", 2) + v1_body + b"\x02\x02\x02"
    with pytest.raises(WireFormatError, match="bytes left after a v2 TrainingSample"):
        decode_sample(relabelled)


def test_signals_that_match_the_schema_pass():
    assert schema_for_signals(list(DEFAULT_SIGNALS)).version == latest_version()
    assert schema_for_signals(DEFAULT_SIGNALS, version=1).version == 1


def test_signals_mismatch_says_what_to_fix():
    wanted = (*DEFAULT_SIGNALS, "follow")
    with pytest.raises(SignalsMismatchError) as caught:
        SampleEncoder(wanted)
    message = str(caught.value)
    assert isinstance(caught.value, ValueError)
    assert "samples.signals [like, share, comment, favorite, play, skip, follow]" in message
    assert "training_sample.v2.avsc" in message
    assert "add spark_jobs/samples/encoding/schemas/training_sample.v3.avsc" in message
    assert "like, share, comment, favorite, play, skip, follow" in message
    assert '"default": 0' in message


def test_signals_in_another_order_or_not_avro_names_are_rejected():
    with pytest.raises(SignalsMismatchError, match="in that order"):
        schema_for_signals(tuple(reversed(DEFAULT_SIGNALS)))
    with pytest.raises(SignalsMismatchError, match="long-press cannot be Avro field names"):
        schema_for_signals((*DEFAULT_SIGNALS, "long-press"))


@pytest.mark.parametrize("broken", [
    {"labels": {"like": 1, "share": 0}},  # a missing label is not silently 0
    {"labels": {**sample()["labels"], "follow": 1}},  # a label the schema lacks
    {"user_id": "42"},
    {"context": None},
    {"extra": 1},
])
def test_samples_that_do_not_fit_are_clear_errors(broken):
    with pytest.raises(SampleEncodingError, match=r"sample 'v-1' does not fit "
                                                  r"training_sample\.v2\.avsc"):
        SampleEncoder().encode(sample(**broken))


def test_defaults_must_name_optional_fields():
    with pytest.raises(SampleEncodingError, match="not optional fields"):
        SampleEncoder(defaults={"context": "{}"})
    with pytest.raises(SampleEncodingError, match="optional: none"):
        SampleEncoder(version=1, defaults={"window_ms": 1})
