"""The versioned TrainingSample schemas kept in the repo, and their compatibility check.

The schemas are files, `schemas/training_sample.v<N>.avsc`, shipped inside the package, so
the job, a consumer and a test all read the same text. A schema's id on the wire is its
version number N: the repo is the registry, and a new version is a new file (never an edit
of an old one, whose bytes are already in Kafka). Versions are numbered 1, 2, ... without
gaps, and every version must stay backward and forward compatible with the one before
(`check_compatible`, run by the unit tests, with the Apache Avro library's reader/writer
compatibility checker), so that old samples read with a new schema and new samples read
with an old one. fastavro, which encodes and decodes, has no such checker.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

import fastavro

if TYPE_CHECKING:
    from avro.compatibility import SchemaCompatibilityResult

SCHEMA_PACKAGE = "spark_jobs.samples.encoding"
SCHEMA_FOLDER = "schemas"
SCHEMA_STEM = "training_sample"
RECORD_NAME = "TrainingSample"
NAMESPACE = "tideline.samples"
LABELS_FIELD = "labels"
_FILE = re.compile(rf"{SCHEMA_STEM}\.v([1-9][0-9]*)\.avsc")


class SampleSchemaError(ValueError):
    """A sample schema problem (bad schema file, unknown version, mismatched signals, bad
    bytes); the message says what to fix."""


class SchemaCompatibilityError(SampleSchemaError):
    """A newer schema cannot read samples of an older one, or the other way round."""


@dataclass(frozen=True)
class SchemaVersion:
    """One schema file: its version (= wire id), JSON text, parsed form and label fields."""

    version: int
    filename: str
    text: str
    parsed: dict[str, Any]
    labels: tuple[str, ...]

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(f["name"] for f in self.parsed["fields"])

    @property
    def optional_fields(self) -> dict[str, Any]:
        """Top-level fields with a default (name -> default): a sample may leave them out."""
        return {f["name"]: f["default"] for f in self.parsed["fields"] if "default" in f}


def schema_path(version: int) -> str:
    """The file name of a version, relative to the package (for error messages)."""
    return f"spark_jobs/samples/encoding/{SCHEMA_FOLDER}/{SCHEMA_STEM}.v{version}.avsc"


def _label_fields(schema: dict[str, Any], filename: str) -> tuple[str, ...]:
    field = next((f for f in schema.get("fields", []) if f.get("name") == LABELS_FIELD), None)
    kind = field.get("type") if field else None
    if not isinstance(kind, dict) or kind.get("type") != "record":
        raise SampleSchemaError(f"{filename}: needs a field {LABELS_FIELD!r} of record type")
    names = []
    for label in kind.get("fields", []):
        if label.get("type") != "int":
            raise SampleSchemaError(
                f"{filename}: label {label.get('name')!r} must be an int (0 or 1)")
        names.append(label["name"])
    return tuple(names)


def _load(filename: str, version: int, text: str) -> SchemaVersion:
    try:
        schema = json.loads(text)
        parsed = fastavro.parse_schema(json.loads(text))
    except (ValueError, fastavro.schema.SchemaParseException) as exc:
        raise SampleSchemaError(f"{filename} is not a valid Avro schema: {exc}") from exc
    if schema.get("name") != RECORD_NAME or schema.get("namespace") != NAMESPACE:
        raise SampleSchemaError(
            f"{filename}: the record must be {NAMESPACE}.{RECORD_NAME}, got "
            f"{schema.get('namespace')}.{schema.get('name')}")
    return SchemaVersion(version, filename, text, parsed, _label_fields(schema, filename))


@cache
def schema_versions() -> dict[int, SchemaVersion]:
    """Every schema file of the package by version, read and parsed once per process."""
    folder = resources.files(SCHEMA_PACKAGE).joinpath(SCHEMA_FOLDER)
    found: dict[int, SchemaVersion] = {}
    for entry in folder.iterdir():
        match = _FILE.fullmatch(entry.name)
        if match:
            version = int(match.group(1))
            found[version] = _load(entry.name, version, entry.read_text(encoding="utf-8"))
    if sorted(found) != list(range(1, len(found) + 1)):
        raise SampleSchemaError(
            f"schema versions must be 1..N without gaps, found {sorted(found)} in "
            f"spark_jobs/samples/encoding/{SCHEMA_FOLDER}/ (is the folder in the package data?)")
    return dict(sorted(found.items()))


def latest_version() -> int:
    """The newest schema version: the one the job writes."""
    return max(schema_versions())


def get_schema(version: int) -> SchemaVersion:
    """One version; SampleSchemaError naming the known ones when it does not exist."""
    versions = schema_versions()
    if version not in versions:
        raise SampleSchemaError(
            f"unknown TrainingSample schema version {version}; this build knows "
            f"{', '.join(map(str, versions))} (a newer writer needs a newer build, or add "
            f"{schema_path(version)})")
    return versions[version]


def _reasons(result: SchemaCompatibilityResult) -> str:
    kinds = ", ".join(kind.value for kind in result.incompatibilities)
    where = sorted(location for location in result.locations if location != "/") or ["/"]
    return f"{kinds}: {'; '.join(sorted(result.messages))} (at {', '.join(where)})"


def check_reads(writer: SchemaVersion, reader: SchemaVersion) -> None:
    """SchemaCompatibilityError, with the checker's reasons, unless every sample written with
    `writer` can be read with `reader` (Avro schema resolution, Apache Avro's
    ReaderWriterCompatibilityChecker: the rules, not a sample of values). Imported here: the
    job only encodes, and needs neither the checker nor the library."""
    from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType
    from avro.schema import parse

    result = ReaderWriterCompatibilityChecker().get_compatibility(
        reader=parse(reader.text), writer=parse(writer.text))
    if result.compatibility is not SchemaCompatibilityType.compatible:
        raise SchemaCompatibilityError(
            f"{reader.filename} cannot read samples written with {writer.filename}: "
            f"{_reasons(result)}")


def check_compatible(older: int, newer: int) -> None:
    """Backward (newer reads older) and forward (older reads newer) compatibility; raises
    SchemaCompatibilityError saying which direction fails and why."""
    old, new = get_schema(older), get_schema(newer)
    check_reads(old, new)
    check_reads(new, old)
