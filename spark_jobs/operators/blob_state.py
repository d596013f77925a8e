"""One binary state value per key plus a single pending event-time timer.

Python state calls cross a socket to the JVM, so each processor keeps all of a key's state in
one pickled value: one read and one write per key and micro-batch. The timer registered for
the key is kept inside the value so a stale one can be deleted when the next wake-up moves.
"""

from __future__ import annotations

import pickle

from pyspark.sql.streaming.stateful_processor import StatefulProcessorHandle
from pyspark.sql.types import BinaryType, StructField, StructType

BLOB_SCHEMA = StructType([StructField("blob", BinaryType(), True)])


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
            if old_timer is not None and old_timer > watermark_ms:
                self._handle.deleteTimer(old_timer)
            if timer is not None:
                self._handle.registerTimer(timer)
        if payload is None:
            self._value.clear()
        else:
            self._value.update((pickle.dumps((payload, timer), protocol=5),))

