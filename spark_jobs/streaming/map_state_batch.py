"""Many MapState reads or writes of one transformWithStateInPandas group in few round trips.

Each MapState call of PySpark's state API is one request and one response on the socket to
the JVM's state server, sent and awaited one at a time: 50-95 µs each on a quiet 2-core box,
most of it waiting for the other side (PLATFORM_NOTES "Stateful styles compared"). A step
that reads and writes one entry per record (the view de-duplication: one per view_id) spends
most of its time there. The server answers the requests of a socket in order, one response
each, so the same requests can be sent back to back and their responses read afterwards:
`get_values` and `update_values` send them in chunks, then read a chunk's responses, with
the same messages and the same results as one call per key.

This uses the state client's internals (its socket and message building), checked by
`pipelined_client` against the pinned PySpark: when they are not there (another PySpark, or
an in-memory handle in tests), the public one-call-per-key API is used instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

CHUNK = 256  # requests in flight: far below what the socket buffers hold both ways


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
    out: list[tuple[Any, ...] | None] = []
    for start in range(0, len(keys), CHUNK):
        chunk = keys[start:start + CHUNK]
        for key in chunk:
            call = message.MapStateCall(stateName=name, getValue=message.GetValue(
                userKey=api._serialize_to_bytes(client.user_key_schema, key)))
            _send(api, message.StateRequest(
                stateVariableRequest=message.StateVariableRequest(mapStateCall=call)))
        api.sockfile.flush()
        errors = []
        for _ in chunk:
            status, error, value = api._receive_proto_message()
            if status != 0:
                errors.append(error)
                out.append(None)
            else:
                out.append(api._deserialize_from_bytes(value) if len(value) else None)
        if errors:  # every response of the chunk was read: the socket stays in step
            raise RuntimeError(f"Error getting map state values: {errors[0]}")
    return out


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
    for start in range(0, len(items), CHUNK):
        chunk = items[start:start + CHUNK]
        for key, value in chunk:
            call = message.MapStateCall(stateName=name, updateValue=message.UpdateValue(
                userKey=api._serialize_to_bytes(client.user_key_schema, key),
                value=api._serialize_to_bytes(client.value_schema, value)))
            _send(api, message.StateRequest(
                stateVariableRequest=message.StateVariableRequest(mapStateCall=call)))
        api.sockfile.flush()
        errors = [error for status, error, _ in (api._receive_proto_message() for _ in chunk)
                  if status != 0]
        if errors:
            raise RuntimeError(f"Error updating map state values: {errors[0]}")


def _send(api: Any, request: Any) -> None:
    """One request as the client frames it (version 0, length, message), not flushed."""
    from pyspark.serializers import write_int

    data = request.SerializeToString()
    write_int(0, api.sockfile)
    write_int(len(data), api.sockfile)
    api.sockfile.write(data)
