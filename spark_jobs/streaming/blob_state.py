"""One binary state value per key plus a single pending event-time timer.

Python state calls cross a socket to the JVM, so each processor keeps all of a key's state in
one pickled value: one read and one write per key and micro-batch. The timer registered for
the key is kept inside the value so a stale one can be deleted when the next wake-up moves.
"""

from __future__ import annotations

import pickle
from typing import Protocol

from pyspark.sql.streaming.stateful_processor import StatefulProcessorHandle
from pyspark.sql.types import BinaryType, StructField, StructType

from spark_jobs.streaming.processor import KeyedProcessor, keep_one_timer

BLOB_SCHEMA = StructType([StructField("blob", BinaryType(), True)])


class KeyState(Protocol):
    """What a domain state object offers to be kept as one blob with one timer."""

    def is_empty(self) -> bool: ...

    def to_bytes(self) -> bytes: ...

    def next_wakeup(self) -> int | None: ...


class BlobState:
    """Load/store a (payload bytes, timer) pair for the current key."""

    def __init__(self, handle: StatefulProcessorHandle, name: str = "state") -> None:
        self._handle = handle
        self._value = handle.getValueState(name, BLOB_SCHEMA)

    def load(self) -> tuple[bytes | None, int | None]:
        stored = self._value.get()
        if stored is None or stored[0] is None:
            return None, None
        return pickle.loads(stored[0])

    def store(
        self, payload: bytes | None, timer: int | None, old_timer: int | None, watermark_ms: int
    ) -> None:
        """Persist the payload (or clear it) and move the key's timer to `timer`."""
        if timer != old_timer:
            registered = () if old_timer is None else (old_timer,)
            keep_one_timer(self._handle, registered, timer, watermark_ms)
        if payload is None:
            self._value.clear()
        else:
            self._value.update((pickle.dumps((payload, timer), protocol=5),))

    def save(self, state: KeyState, old_timer: int | None, watermark_ms: int) -> None:
        """Store the domain state and its next wake-up; an empty state is cleared entirely."""
        if state.is_empty():
            self.store(None, None, old_timer, watermark_ms)
        else:
            self.store(state.to_bytes(), state.next_wakeup(), old_timer, watermark_ms)


class BlobStateProcessor(KeyedProcessor):
    """A processor whose key's state is one BlobState (`self.state`)."""

    def open(self, handle: StatefulProcessorHandle) -> None:
        self.state = BlobState(handle)
