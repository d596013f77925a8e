"""Training samples as Avro in the Confluent wire format, with schema evolution.

A message is the magic byte 0, the schema id as 4 big-endian bytes (the version number of a
repo schema, see `registry`, or with `kafka.schema_registry_url` set a schema registry's id,
see `schema_ids`), then the schemaless Avro body. Any Confluent-style
consumer can split the header the usual way; a reader of this package resolves the writer's
version to the version it asks for, so a consumer built against v1 reads v2 samples (it
drops `window_ms`) and one built against v2 reads v1 samples (`window_ms` is None).

The sample is the Python shape of the spec: `{"sample_id", "view_id", "user_id", "post_id",
"ts", "context", "labels": {signal: 0/1}}`, plus the optional fields of newer versions
(`window_ms`). Encoding is strict: a missing label or a field the schema does not know is an
error rather than a silent default, because a label lost here is a wrong training example.
Schemas are parsed once and one buffer is reused: encoding costs a few microseconds.
"""

from __future__ import annotations

import io
import re
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import fastavro
import pyarrow as pa

from spark_jobs.samples.encoding.columnar_avro import (
    ColumnError,
    UnsupportedSchema,
    encode_columns,
)
from spark_jobs.samples.encoding.registry import (
    SampleSchemaError,
    SchemaVersion,
    get_schema,
    latest_version,
    schema_path,
    schema_versions,
)
from spark_jobs.samples.encoding.schema_ids import RepoSchemaIds, SchemaIds, SchemaRegistryFailure

MAGIC = 0
HEADER = struct.Struct(">BI")
DEFAULT_SIGNALS = ("like", "share", "comment", "favorite", "play", "skip")
_AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class SignalsMismatchError(SampleSchemaError):
    """The configured samples.signals are not the label fields of the schema to write."""


class WireFormatError(SampleSchemaError):
    """Bytes that are not a TrainingSample in the Confluent wire format of a known version."""


class SampleEncodingError(SampleSchemaError):
    """A sample that does not fit the schema (missing label, unknown field, wrong type)."""


def _listed(names: Sequence[str]) -> str:
    return ", ".join(names) if names else "(none)"


def schema_for_signals(signals: Sequence[str], version: int | None = None) -> SchemaVersion:
    """The schema to write (default: the newest) after checking that its label fields are
    exactly `signals`, in order; SignalsMismatchError saying what to change otherwise."""
    wanted = tuple(signals)
    schema = get_schema(latest_version() if version is None else version)
    if wanted == schema.labels:
        return schema
    invalid = [s for s in wanted if not _AVRO_NAME.fullmatch(s)]
    if invalid:
        raise SignalsMismatchError(
            f"samples.signals {_listed(invalid)} cannot be Avro field names (letters, digits "
            f"and _, not starting with a digit); rename them in samples.signals")
    matching = [v.version for v in schema_versions().values() if v.labels == wanted]
    hint = (f" (they match version {matching[-1]}, but samples are written with version "
            f"{schema.version})" if matching else "")
    raise SignalsMismatchError(
        f"samples.signals [{_listed(wanted)}] do not match the labels of {schema.filename}: "
        f"[{_listed(schema.labels)}]{hint}. Either set samples.signals to exactly those, in "
        f"that order, or add {schema_path(latest_version() + 1)}: a copy of the newest schema "
        f"whose Labels record has one int field per signal in this order: {_listed(wanted)} "
        f'(give a new label "default": 0 so that older samples stay readable), and run '
        f"tests/unit/test_sample_avro.py, which checks it against the previous version")


def header(version: int) -> bytes:
    """The 5-byte Confluent prefix of a sample written with `version`."""
    return HEADER.pack(MAGIC, version)


class SampleEncoder:
    """Encodes samples with one schema version (default: the newest, checked against
    `signals`). `defaults` fills optional fields a sample leaves out, e.g. {"window_ms":
    600000}; optional fields without one get their schema default (null). `ids` gives the
    header's schema id (default: the version). It reuses one buffer: give each thread its
    own encoder."""

    def __init__(self, signals: Sequence[str] = DEFAULT_SIGNALS, version: int | None = None,
                 defaults: Mapping[str, Any] | None = None,
                 ids: SchemaIds | None = None) -> None:
        self.schema = schema_for_signals(signals, version)
        self.version = self.schema.version
        unknown = set(defaults or {}) - set(self.schema.optional_fields)
        if unknown:
            raise SampleEncodingError(
                f"{sorted(unknown)} are not optional fields of {self.schema.filename} "
                f"(optional: {sorted(self.schema.optional_fields) or 'none'})")
        self._fill = {**self.schema.optional_fields, **(defaults or {})}
        self._header = header((ids or RepoSchemaIds()).id_of(self.schema))
        self._parsed = self.schema.parsed
        self._buffer = io.BytesIO()

    def encode(self, sample: Mapping[str, Any]) -> bytes:
        """The wire bytes of one sample; SampleEncodingError when it does not fit."""
        record = {**self._fill, **sample} if self._fill else sample
        buffer = self._buffer
        buffer.seek(0)
        buffer.truncate()
        buffer.write(self._header)
        try:
            fastavro.schemaless_writer(buffer, self._parsed, record, strict=True)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise SampleEncodingError(
                f"sample {sample.get('sample_id')!r} does not fit {self.schema.filename}: {exc}"
            ) from exc
        return buffer.getvalue()

    def encode_table(self, samples: pa.Table) -> list[bytes]:
        """The wire bytes of every row of `samples` (columns named as the schema's fields),
        encoded column by column (columnar_avro), byte for byte what `encode` writes;
        SampleEncodingError when a column does not fit."""
        try:
            return encode_columns(samples, self._parsed, self._header, self._fill)
        except ColumnError as exc:
            raise SampleEncodingError(
                f"samples do not fit {self.schema.filename}: {exc}") from exc
        except UnsupportedSchema:
            return [self.encode(sample) for sample in samples.to_pylist()]


def writer_version(data: bytes) -> int:
    """The schema id in a message's header (the version, unless a schema registry gave the
    ids); WireFormatError for other bytes."""
    if len(data) < HEADER.size:
        raise WireFormatError(f"{len(data)} bytes are too short for a TrainingSample message "
                              f"(5-byte header, then the Avro body)")
    magic, version = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise WireFormatError(
            f"first byte is {magic}, not the Confluent magic byte 0: not an Avro sample "
            f"(JSON text starts with 123 '{{')")
    return version


class SampleDecoder:
    """Decodes samples of any known version into `reader_version` (default: the newest);
    `ids` tells which schema an id in the header stands for (default: the repo version)."""

    def __init__(self, reader_version: int | None = None, ids: SchemaIds | None = None) -> None:
        self.reader = get_schema(latest_version() if reader_version is None else reader_version)
        self.ids = ids or RepoSchemaIds()

    def decode(self, data: bytes) -> dict[str, Any]:
        """The sample, shaped by the reader schema; WireFormatError for bytes that are not a
        sample of a known version (unknown version, truncated or trailing bytes)."""
        version = writer_version(data)
        try:
            writer = self.ids.writer_schema(version)
        except SchemaRegistryFailure:
            raise
        except SampleSchemaError as exc:
            raise WireFormatError(str(exc)) from exc
        reader = None if writer is self.reader.parsed else self.reader.parsed
        body = io.BytesIO(data)
        body.seek(HEADER.size)
        try:
            sample = fastavro.schemaless_reader(body, writer, reader)
        except Exception as exc:  # EOFError, UnicodeDecodeError, SchemaResolutionError, ...
            raise WireFormatError(
                f"cannot read a v{version} TrainingSample as v{self.reader.version}: "
                f"{type(exc).__name__}: {exc}") from exc
        if body.tell() != len(data):
            raise WireFormatError(
                f"{len(data) - body.tell()} bytes left after a v{version} TrainingSample: "
                f"written with another schema than its header says")
        return sample


_ENCODERS: dict[tuple[tuple[str, ...], int | None], SampleEncoder] = {}
_DECODERS: dict[int | None, SampleDecoder] = {}


def encode_sample(sample: Mapping[str, Any], signals: Sequence[str] = DEFAULT_SIGNALS,
                  version: int | None = None) -> bytes:
    """One-off encoding with a cached encoder (a loop should hold its own SampleEncoder)."""
    key = (tuple(signals), version)
    encoder = _ENCODERS.get(key)
    if encoder is None:
        encoder = _ENCODERS[key] = SampleEncoder(signals, version)
    return encoder.encode(sample)


def decode_sample(data: bytes, reader_version: int | None = None) -> dict[str, Any]:
    """One-off decoding into `reader_version` (default: the newest) with a cached decoder."""
    decoder = _DECODERS.get(reader_version)
    if decoder is None:
        decoder = _DECODERS[reader_version] = SampleDecoder(reader_version)
    return decoder.decode(data)
