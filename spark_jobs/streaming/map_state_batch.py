"""Many MapState reads or writes of one transformWithStateInPandas group in few round trips.

Each MapState call of PySpark's state API is one request and one response on the socket to
the JVM's state server, sent and awaited one at a time: 50-95 µs each on a quiet 2-core box,
most of it waiting for the other side (PLATFORM_NOTES "Stateful styles compared"). A step
that reads and writes one entry per record (the view de-duplication: one per view_id) spends
most of its time there. The server answers the requests of a socket in order, one response
each, so the same requests can be sent back to back and their responses read afterwards:
`get_values` and `update_values` send them in chunks, reading a chunk's responses after the
next chunk is sent, with the same messages and the same results as one call per key.

This uses the state client's internals (its socket and message building), checked by
`pipelined_client` against the pinned PySpark: when they are not there (another PySpark, or
an in-memory handle in tests), the public one-call-per-key API is used instead.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import islice
from typing import Any

CHUNK = 256  # requests per chunk; two chunks in flight stay far below the socket buffers


def pipelined_client(state: Any) -> tuple[Any, Any, str] | None:
    """(map state client, its API client, state name) when `state` is PySpark's socket-backed
    MapState whose internals this module knows, else None."""
    client = getattr(state, "_mapStateClient", None)
    api = getattr(client, "_stateful_processor_api_client", None)
    name = getattr(state, "_stateName", None)
    needed = ("sockfile", "_serialize_to_bytes", "_deserialize_from_bytes",
              "_receive_proto_message")
    if api is None or name is None or not all(hasattr(api, n) for n in needed):
        return None
    if not hasattr(client, "user_key_schema") or not hasattr(client, "value_schema"):
        return None
    return client, api, name


def get_values(state: Any, keys: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...] | None]:
    """`state.getValue(key)` for every key, in order."""
    found = pipelined_client(state)
    if found is None:
        return [state.getValue(key) for key in keys]
    import pyspark.sql.streaming.proto.StateMessage_pb2 as message

    client, api, name = found

    def request(key: tuple[Any, ...]) -> Any:
        return message.MapStateCall(stateName=name, getValue=message.GetValue(
            userKey=api._serialize_to_bytes(client.user_key_schema, key)))

    values = _exchange(api, message, map(request, keys), len(keys), "getting map state values")
    return [api._deserialize_from_bytes(value) if len(value) else None for value in values]


def update_values(state: Any, items: Sequence[tuple[tuple[Any, ...], tuple[Any, ...]]]
                  ) -> None:
    """`state.updateValue(key, value)` for every (key, value), in order."""
    found = pipelined_client(state)
    if found is None:
        for key, value in items:
            state.updateValue(key, value)
        return
    import pyspark.sql.streaming.proto.StateMessage_pb2 as message

    client, api, name = found

    def request(item: tuple[tuple[Any, ...], tuple[Any, ...]]) -> Any:
        key, value = item
        return message.MapStateCall(stateName=name, updateValue=message.UpdateValue(
            userKey=api._serialize_to_bytes(client.user_key_schema, key),
            value=api._serialize_to_bytes(client.value_schema, value)))

    _exchange(api, message, map(request, items), len(items), "updating map state values")


def _exchange(api: Any, message: Any, calls: Iterator[Any], count: int, doing: str
              ) -> list[bytes]:
    """Send `count` map state calls, one chunk ahead of the responses read (the server
    works on a chunk while the next is built), and return the responses' values in order;
    raise once every response is read (the socket stays in step) if any call failed."""
    from pyspark.serializers import write_int

    out = api.sockfile
    responses: list[tuple[int, str, bytes]] = []
    in_flight = 0
    for _ in range(0, count, CHUNK):
        sent = 0
        for call in islice(calls, CHUNK):
            data = message.StateRequest(stateVariableRequest=message.StateVariableRequest(
                mapStateCall=call)).SerializeToString()
            write_int(0, out)  # as the client frames a request: version 0, length, message
            write_int(len(data), out)
            out.write(data)
            sent += 1
        out.flush()
        responses.extend(api._receive_proto_message() for _ in range(in_flight))
        in_flight = sent
    responses.extend(api._receive_proto_message() for _ in range(in_flight))
    errors = [error for status, error, _ in responses if status != 0]
    if errors:
        raise RuntimeError(f"Error {doing}: {errors[0]} ({len(errors)} of {count} calls)")
    return [value for _, _, value in responses]
