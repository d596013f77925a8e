"""The schema id in a sample's Confluent header: the repo version, or a schema registry's id.

Embedded (the default, `kafka.schema_registry_url` unset): the id is the version number of the
repo schema (`registry`), which is its own registry. With a URL, the writer registers the
schema it writes under the topic's subject (`<topic>-value`, Confluent's TopicNameStrategy)
and writes the id the registry gives; a reader asks the registry for the schema of an id it
has not seen, so it reads samples of a schema version this build does not ship, too.
confluent-kafka's SchemaRegistryClient does the HTTP and caches both directions.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

import fastavro

from spark_jobs.contracts.topics import TOPIC_TRAINING_SAMPLES
from spark_jobs.samples.encoding.registry import SampleSchemaError, SchemaVersion, get_schema
from spark_jobs.streaming.settings import KafkaSettings

TIMEOUT_S = 10.0  # per HTTP call; the client has none by default


class SchemaRegistryFailure(SampleSchemaError):
    """The schema registry refused a schema, does not know an id, or cannot be reached."""


class SchemaIds(Protocol):
    def id_of(self, version: SchemaVersion) -> int:
        """The id to write in the header of samples written with `version`."""
        ...

    def writer_schema(self, schema_id: int) -> Any:
        """The parsed (fastavro) schema a sample with `schema_id` was written with;
        SampleSchemaError when the id is unknown."""
        ...


class RepoSchemaIds:
    """The embedded registry: an id is a repo schema version."""

    def id_of(self, version: SchemaVersion) -> int:
        return version.version

    def writer_schema(self, schema_id: int) -> Any:
        return get_schema(schema_id).parsed


def subject_of(topic: str) -> str:
    """Confluent's default (TopicNameStrategy) subject of a topic's message values."""
    return f"{topic}-value"


class RegistrySchemaIds:
    """Ids from a Confluent-compatible schema registry at `url`."""

    def __init__(self, url: str, subject: str = subject_of(TOPIC_TRAINING_SAMPLES),
                 retries: int = 3) -> None:
        from confluent_kafka.schema_registry import SchemaRegistryClient

        self.url, self.subject = url, subject
        self._client = SchemaRegistryClient(
            {"url": url, "timeout": TIMEOUT_S, "max.retries": retries})
        self._ids: dict[int, int] = {}  # repo version -> registry id
        self._parsed: dict[int, Any] = {}  # registry id -> parsed schema

    def id_of(self, version: SchemaVersion) -> int:
        if version.version not in self._ids:
            from confluent_kafka.schema_registry import Schema

            self._ids[version.version] = self._call(
                f"register {version.filename} under subject {self.subject!r}",
                lambda: self._client.register_schema(self.subject, Schema(version.text, "AVRO")))
        return self._ids[version.version]

    def writer_schema(self, schema_id: int) -> Any:
        if schema_id not in self._parsed:
            schema = self._call(f"look up schema id {schema_id}",
                                lambda: self._client.get_schema(schema_id))
            if (schema.schema_type or "AVRO") != "AVRO":
                raise SchemaRegistryFailure(
                    f"schema id {schema_id} at {self.url} is a {schema.schema_type} schema, "
                    f"not Avro: not a TrainingSample")
            self._parsed[schema_id] = fastavro.parse_schema(json.loads(schema.schema_str))
        return self._parsed[schema_id]

    def _call(self, what: str, call: Any) -> Any:
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        try:
            return call()
        except SchemaRegistryError as exc:
            raise SchemaRegistryFailure(
                f"schema registry {self.url} refused to {what}: HTTP {exc.http_status_code}, "
                f"error {exc.error_code}: {exc.error_message}") from exc
        except Exception as exc:  # httpx's connection errors and timeouts
            raise SchemaRegistryFailure(
                f"cannot {what} at schema registry {self.url} (kafka.schema_registry_url): "
                f"{type(exc).__name__}: {exc}") from exc


def schema_ids(kafka: KafkaSettings) -> SchemaIds:
    """The registry `kafka.schema_registry_url` names, else the repo's versions."""
    url = kafka.schema_registry_url
    return RepoSchemaIds() if url is None else RegistrySchemaIds(url)
