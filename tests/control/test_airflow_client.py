"""The platform's Airflow API client against a real local HTTP server that answers slowly
or not at all: a busy API server is waited for and retried, one that never answers gives an
error that names the call."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from types import SimpleNamespace

import pytest
from helpers.receivers import local_http_server

from spark_jobs.control.orchestration import airflow_api
from spark_jobs.control.orchestration.airflow_api import AirflowApiError, AirflowClient

TIMEOUT_S = 0.3


class SlowAirflow:
    """/auth/token and /api/v2/dags; the first `slow_answers` answers to /dags come after
    the client's read timeout."""

    def __init__(self, slow_answers: int) -> None:
        self.slow_answers = slow_answers
        self.dags_calls = 0
        self.lock = threading.Lock()


def handler_for(state: SlowAirflow) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _answer(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up on a slow answer

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self._answer(201, {"access_token": "t"})

        def do_GET(self) -> None:
            with state.lock:
                state.dags_calls += 1
                slow = state.dags_calls <= state.slow_answers
            if slow:
                time.sleep(TIMEOUT_S * 2)
            self._answer(200, {"dags": [{"dag_id": "ramp_snapshot", "is_paused": False}]})

    return Handler


@pytest.fixture
def serve() -> Iterator:
    with contextlib.ExitStack() as servers:
        yield lambda state: servers.enter_context(local_http_server(handler_for(state)))


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """The client's pauses between attempts skipped (its module's `time` only)."""
    monkeypatch.setattr(airflow_api, "time", SimpleNamespace(
        sleep=lambda _s: None, monotonic=time.monotonic))


def test_a_slow_answer_is_retried_until_one_comes_in_time(serve):
    state = SlowAirflow(slow_answers=airflow_api.RETRIES - 1)
    with AirflowClient(serve(state), "admin", "pw", timeout_s=TIMEOUT_S) as client:
        assert client.dag_ids() == ["ramp_snapshot"]
    assert state.dags_calls == airflow_api.RETRIES


def test_no_answer_in_time_fails_with_the_call_named(serve):
    state = SlowAirflow(slow_answers=airflow_api.RETRIES)
    url = serve(state)
    with (AirflowClient(url, "admin", "pw", timeout_s=TIMEOUT_S) as client,
          pytest.raises(AirflowApiError, match=f"GET /dags: no answer from {url} after")):
        client.dags()
    assert state.dags_calls == airflow_api.RETRIES


def test_a_server_that_is_not_there_fails_with_the_call_named():
    with (AirflowClient("http://127.0.0.1:9", "admin", "pw", timeout_s=TIMEOUT_S) as client,
          pytest.raises(AirflowApiError, match="ConnectError")):
        client.dags()
