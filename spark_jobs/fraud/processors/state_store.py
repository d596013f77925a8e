"""The fraud engine's WindowStore on Spark state: MapStates behind a per-batch cache.

Every state call crosses a socket to the JVM, so a micro-batch reads each (rule, key) window
and each transaction id at most once, works on the cached copies, and writes back only what
changed when the shard's rows are done (`flush`). Windows, seen ids and meta values are three
MapStates of one shard key; values are pickled (plain data, see spark_jobs.fraud.core.store).
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable
from typing import Any

from pyspark.sql.streaming.stateful_processor import StatefulProcessorHandle
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

WINDOW_KEY = StructType([StructField("rule_id", LongType()), StructField("key", StringType())])
SEEN_KEY = StructType([StructField("transaction_id", StringType())])
META_KEY = StructType([StructField("name", StringType())])
BLOB = StructType([StructField("blob", BinaryType())])
EVENT_TIME = StructType([StructField("event_time", LongType())])

_DELETED = object()


def _dump(value: Any) -> tuple[bytes]:
    return (pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL),)


def _load(stored: Any) -> Any:
    return None if stored is None else pickle.loads(stored[0])


class SparkShardStore:
    """A WindowStore for one shard key, valid for one handleInputRows/handleExpiredTimer."""

    def __init__(self, handle: StatefulProcessorHandle) -> None:
        self._windows = handle.getMapState("windows", WINDOW_KEY, BLOB)
        self._seen = handle.getMapState("seen", SEEN_KEY, EVENT_TIME)
        self._meta = handle.getMapState("meta", META_KEY, BLOB)
        self.reset()

    def reset(self) -> None:
        """Forget the cache: the next grouping key (or batch) starts from the stored state."""
        self._window_cache: dict[tuple[int, str], Any] = {}
        self._dirty_windows: set[tuple[int, str]] = set()
        self._seen_cache: dict[str, int | None] = {}
        self._dirty_seen: set[str] = set()
        self._meta_cache: dict[str, Any] = {}
        self._dirty_meta: set[str] = set()

    # -- windows ---------------------------------------------------------------------------

    def get_window(self, rule_id: int, key: str) -> Any | None:
        cache_key = (rule_id, key)
        if cache_key not in self._window_cache:
            self._window_cache[cache_key] = _load(self._windows.getValue(cache_key))
        value = self._window_cache[cache_key]
        return None if value is _DELETED else value

    def put_window(self, rule_id: int, key: str, window: Any) -> None:
        self._window_cache[(rule_id, key)] = window
        self._dirty_windows.add((rule_id, key))

    def delete_window(self, rule_id: int, key: str) -> None:
        self._window_cache[(rule_id, key)] = _DELETED
        self._dirty_windows.add((rule_id, key))

    def windows(self) -> Iterable[tuple[int, str, Any]]:
        found: list[tuple[int, str, Any]] = []
        for stored_key, stored in self._windows.iterator():
            cache_key = (int(stored_key[0]), str(stored_key[1]))
            if cache_key not in self._window_cache:
                found.append((*cache_key, _load(stored)))
        for (rule_id, key), value in self._window_cache.items():
            if value is not None and value is not _DELETED:
                found.append((rule_id, key, value))
        return found

    def delete_rule_windows(self, rule_id: int) -> None:
        for stored_rule, key, _ in self.windows():
            if stored_rule == rule_id:
                self.delete_window(rule_id, key)

    def clear_windows(self) -> None:
        self._windows.clear()
        self._window_cache.clear()
        self._dirty_windows.clear()

    # -- seen transaction ids -------------------------------------------------------------

    def is_seen(self, transaction_id: str) -> bool:
        if transaction_id not in self._seen_cache:
            stored = self._seen.getValue((transaction_id,))
            self._seen_cache[transaction_id] = None if stored is None else int(stored[0])
        return self._seen_cache[transaction_id] is not None

    def put_seen(self, transaction_id: str, event_time: int) -> None:
        self._seen_cache[transaction_id] = event_time
        self._dirty_seen.add(transaction_id)

    def expire_seen(self, before_ms: int) -> int | None:
        self.flush_seen()
        oldest: int | None = None
        for stored_key, stored in self._seen.iterator():
            event_time = int(stored[0])
            if event_time < before_ms:
                self._seen.removeKey(stored_key)
                self._seen_cache.pop(str(stored_key[0]), None)
            elif oldest is None or event_time < oldest:
                oldest = event_time
        return oldest

    # -- meta ----------------------------------------------------------------------------

    def get_meta(self, name: str) -> Any | None:
        if name not in self._meta_cache:
            self._meta_cache[name] = _load(self._meta.getValue((name,)))
        return self._meta_cache[name]

    def put_meta(self, name: str, value: Any) -> None:
        self._meta_cache[name] = value
        self._dirty_meta.add(name)

    # -- write back ----------------------------------------------------------------------

    def flush_seen(self) -> None:
        for transaction_id in self._dirty_seen:
            event_time = self._seen_cache[transaction_id]
            if event_time is not None:
                self._seen.updateValue((transaction_id,), (event_time,))
        self._dirty_seen.clear()

    def flush(self) -> None:
        """Write every changed window, id and meta value back to Spark state."""
        for cache_key in self._dirty_windows:
            value = self._window_cache[cache_key]
            if value is _DELETED or value is None:
                self._windows.removeKey(cache_key)
            else:
                self._windows.updateValue(cache_key, _dump(value))
        self._dirty_windows.clear()
        self.flush_seen()
        for name in self._dirty_meta:
            value = self._meta_cache[name]
            if value is None:
                self._meta.removeKey((name,))
            else:
                self._meta.updateValue((name,), _dump(value))
        self._dirty_meta.clear()
