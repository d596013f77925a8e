"""Schema ids from a Confluent-compatible schema registry (`kafka.schema_registry_url`).

No registry package can be had here, so the registry is a small HTTP server of this file on
127.0.0.1 that speaks the two calls the client makes (POST /subjects/{subject}/versions,
GET /schemas/ids/{id}) as Confluent's Schema Registry does; confluent-kafka's real
SchemaRegistryClient talks to it over HTTP.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from spark_jobs.config.fields import ConfigError
from spark_jobs.samples.encoding.registry import get_schema, latest_version
from spark_jobs.samples.encoding.sample_avro import (
    SampleDecoder,
    SampleEncoder,
    WireFormatError,
    writer_version,
)
from spark_jobs.samples.encoding.schema_ids import (
    RegistrySchemaIds,
    RepoSchemaIds,
    SchemaRegistryFailure,
    schema_ids,
    subject_of,
)
from spark_jobs.settings import load_settings

FIRST_ID = 100  # unlike any repo version, so a test sees which kind of id a header holds


class Registry:
    """Subjects and ids as a Confluent registry keeps them: one id per distinct schema text,
    shared by every subject that registers it."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.subjects: dict[str, list[int]] = {}
        self.lock = threading.Lock()

    def register(self, subject: str, text: str) -> int:
        with self.lock:
            schema_id = self.ids.setdefault(text, FIRST_ID + len(self.ids))
            versions = self.subjects.setdefault(subject, [])
            if schema_id not in versions:
                versions.append(schema_id)
            return schema_id

    def schema(self, schema_id: int) -> str | None:
        return next((text for text, known in self.ids.items() if known == schema_id), None)


def handler_for(registry: Registry) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test output clean
            pass

        def reply(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            parts = urlsplit(self.path).path.strip("/").split("/")
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if len(parts) != 3 or parts[0] != "subjects" or parts[2] != "versions":
                self.reply(404, {"error_code": 404, "message": "HTTP 404 Not Found"})
            elif body.get("schemaType", "AVRO") != "AVRO":
                self.reply(422, {"error_code": 42201, "message": "Invalid schema"})
            else:
                self.reply(200, {"id": registry.register(unquote(parts[1]), body["schema"])})

        def do_GET(self) -> None:
            parts = urlsplit(self.path).path.strip("/").split("/")
            text = (registry.schema(int(parts[2])) if len(parts) == 3 and parts[:2] ==
                    ["schemas", "ids"] and parts[2].isdigit() else None)
            if text is None:
                self.reply(404, {"error_code": 40403, "message": "Schema not found"})
            else:
                self.reply(200, {"schema": text})

    return Handler


@pytest.fixture
def registry() -> Iterator[tuple[Registry, str]]:
    state = Registry()
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(state))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def sample(**changes: Any) -> dict[str, Any]:
    base = {"sample_id": "v-1", "view_id": "v-1", "user_id": 42, "post_id": 7,
            "ts": 1_767_225_600_123, "context": "{}",
            "labels": {"like": 1, "share": 0, "comment": 0, "favorite": 0, "play": 1,
                       "skip": 0}}
    return {**base, **changes}


def test_without_a_url_the_header_holds_the_repo_version():
    settings = load_settings(environ={})
    assert settings.kafka.schema_registry_url is None
    assert isinstance(schema_ids(settings.kafka), RepoSchemaIds)
    encoded = SampleEncoder(version=1, ids=schema_ids(settings.kafka)).encode(sample())
    assert writer_version(encoded) == 1


def test_with_a_url_samples_carry_the_registry_id_and_read_back_through_it(registry):
    state, url = registry
    settings = load_settings(environ={}, overrides={"kafka": {"schema_registry_url": url}})
    ids = schema_ids(settings.kafka)
    assert isinstance(ids, RegistrySchemaIds)
    old = SampleEncoder(version=1, ids=ids).encode(sample(sample_id="old"))
    new = SampleEncoder(ids=ids, defaults={"window_ms": 600_000}).encode(sample())
    assert (writer_version(old), writer_version(new)) == (FIRST_ID, FIRST_ID + 1)
    assert state.subjects == {"training_samples-value": [FIRST_ID, FIRST_ID + 1]}
    assert subject_of("training_samples") == "training_samples-value"
    assert state.schema(FIRST_ID) == get_schema(1).text
    # a second writer (a restarted job) registers again and gets the same ids
    again = RegistrySchemaIds(url)
    assert again.id_of(get_schema(1)) == FIRST_ID

    reader = SampleDecoder(ids=RegistrySchemaIds(url))  # a consumer: ids from the registry
    assert reader.decode(new)["window_ms"] == 600_000
    assert reader.decode(old) == {**sample(sample_id="old"), "window_ms": None}
    assert SampleDecoder(1, ids=RegistrySchemaIds(url)).decode(new) == sample()
    unknown = f"unknown TrainingSample schema version {FIRST_ID + 1}"
    with pytest.raises(WireFormatError, match=unknown):
        SampleDecoder().decode(new)  # registry ids are not repo versions


def test_an_id_the_registry_does_not_know_is_a_clear_error(registry):
    _, url = registry
    data = SampleEncoder(version=latest_version()).encode(sample(window_ms=1))  # id = version
    with pytest.raises(SchemaRegistryFailure,
                       match=rf"schema registry {url} refused to look up schema id "
                             rf"{latest_version()}: HTTP 404, error 40403: Schema not found"):
        SampleDecoder(ids=RegistrySchemaIds(url)).decode(data)


def test_an_unreachable_registry_names_the_setting():
    with socket.socket() as probe:  # a port nothing listens on once it is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ids = RegistrySchemaIds(f"http://127.0.0.1:{port}", retries=0)
    with pytest.raises(SchemaRegistryFailure, match=r"cannot register training_sample.v1.avsc "
                       r"under subject 'training_samples-value' at schema registry .*"
                       r"\(kafka.schema_registry_url\): ConnectError"):
        SampleEncoder(version=1, ids=ids)


@pytest.mark.parametrize("url", ["127.0.0.1:8081", "ftp://registry", "http://"])
def test_the_url_must_be_http(url):
    with pytest.raises(ConfigError, match=r"kafka\.schema_registry_url must be an http"):
        load_settings(environ={}, overrides={"kafka": {"schema_registry_url": url}})
