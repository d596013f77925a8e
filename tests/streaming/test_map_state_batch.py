"""Pipelined MapState calls against a fake state server that speaks the client's framing:
the same values and the same writes as one call per key, responses never read before their
request was flushed, at most two chunks in flight, and the socket left in step on errors."""

from __future__ import annotations

import io
import pickle
import struct
from typing import Any

import pyspark.sql.streaming.proto.StateMessage_pb2 as message
import pytest

from spark_jobs.streaming.map_state_batch import CHUNK, get_values, update_values


class FakeServer:
    """Answers the requests of a socket in order, as the JVM's state server does: only the
    bytes flushed so far can be read, one response per request."""

    def __init__(self, failing: set[Any] = frozenset()) -> None:
        self.map: dict[Any, Any] = {}
        self.failing = failing
        self.flushed = 0  # bytes the client has flushed
        self.read = 0  # bytes of requests answered
        self.max_in_flight = 0

    def answer(self, sent: bytes) -> tuple[int, str, bytes]:
        if self.read >= self.flushed:
            raise AssertionError("a response awaited before its request was flushed")
        version, length = struct.unpack_from("!ii", sent, self.read)
        assert version == 0
        start = self.read + 8
        request = message.StateRequest()
        request.ParseFromString(sent[start:start + length])
        self.read = start + length
        call = request.stateVariableRequest.mapStateCall
        assert call.stateName == "firsts"
        if call.HasField("getValue"):
            key = pickle.loads(call.getValue.userKey)
            if key in self.failing:
                return 1, f"no {key}", b""
            value = self.map.get(key)
            return 0, "", b"" if value is None else pickle.dumps(value)
        key = pickle.loads(call.updateValue.userKey)
        if key in self.failing:
            return 1, f"no {key}", b""
        self.map[key] = pickle.loads(call.updateValue.value)
        return 0, "", b""


class Sock(io.BytesIO):
    def __init__(self, server: FakeServer) -> None:
        super().__init__()
        self.server = server

    def flush(self) -> None:
        self.server.flushed = len(self.getvalue())


class FakeApi:
    """The parts of PySpark's StatefulProcessorApiClient the module uses."""

    def __init__(self, server: FakeServer) -> None:
        self.server = server
        self.sockfile = Sock(server)
        self.answered = 0

    def _serialize_to_bytes(self, schema: Any, data: tuple[Any, ...]) -> bytes:
        return pickle.dumps(data)

    def _deserialize_from_bytes(self, value: bytes) -> Any:
        return pickle.loads(value)

    def _receive_proto_message(self) -> tuple[int, str, bytes]:
        sent = self.sockfile.getvalue()
        requests_flushed = _count(sent[:self.server.flushed])
        self.server.max_in_flight = max(self.server.max_in_flight,
                                        requests_flushed - self.answered)
        self.answered += 1
        return self.server.answer(sent)


def _count(data: bytes) -> int:
    at = count = 0
    while at < len(data):
        _, length = struct.unpack_from("!ii", data, at)
        at += 8 + length
        count += 1
    return count


class Client:
    user_key_schema = "view_id string"
    value_schema = "ts long"

    def __init__(self, api: FakeApi) -> None:
        self._stateful_processor_api_client = api


class PipelinedState:
    """Shaped as PySpark's MapState (its private fields)."""

    def __init__(self, server: FakeServer) -> None:
        self._mapStateClient = Client(FakeApi(server))
        self._stateName = "firsts"


class PlainState:
    """A MapState without the socket (the in-memory handle of tests): per-key calls."""

    def __init__(self) -> None:
        self.map: dict[Any, Any] = {}

    def getValue(self, key: Any) -> Any:
        return self.map.get(key)

    def updateValue(self, key: Any, value: Any) -> None:
        self.map[key] = value


@pytest.mark.parametrize("count", [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 7])
def test_pipelined_calls_equal_one_call_per_key(count):
    server = FakeServer()
    state, plain = PipelinedState(server), PlainState()
    items = [((f"v{i % (count // 2 + 1)}",), (i, i * 2)) for i in range(count)]  # repeats
    update_values(state, items)
    update_values(plain, items)
    assert server.map == plain.map  # in order: the last value of a repeated key wins
    keys = [(f"v{i}",) for i in range(count + 5)]  # some never written
    assert get_values(state, keys) == get_values(plain, keys)
    assert server.read == server.flushed == len(state._mapStateClient
                                                ._stateful_processor_api_client
                                                .sockfile.getvalue())
    assert server.max_in_flight <= 2 * CHUNK


def test_a_failed_call_raises_after_every_response_is_read():
    server = FakeServer(failing={("v3",)})
    state = PipelinedState(server)
    with pytest.raises(RuntimeError, match=r"no .*v3"):
        get_values(state, [(f"v{i}",) for i in range(CHUNK + 10)])
    assert server.read == server.flushed  # the socket is in step for the next call
    update_values(state, [(("v1",), (1, 2))])
    assert get_values(state, [("v1",)]) == [(1, 2)]
