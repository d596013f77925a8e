"""The state the fraud engine keeps, behind an interface small enough for Spark state.

Three kinds of entries, all plain picklable data so that a Spark implementation can back them
with MapState/ValueState (or pickled blobs) and tests with dicts:

- windows: (rule_id, key text) -> the window state of `windows.py`;
- seen transaction ids: id text -> eventTime, to count a redelivered transaction once;
- meta: a few named values (the rules as last received, the cleanup clock, the mode).

A store returns what was put; the engine always puts a window back after changing it, so a
store may hand out copies (as a Spark store does) or the stored object itself.
"""

from __future__ import annotations

import heapq
import pickle
from collections.abc import Iterable
from typing import Any, Protocol


class WindowStore(Protocol):
    """Where a FraudEngine keeps its state (one shard's worth)."""

    def get_window(self, rule_id: int, key: str) -> Any | None:
        """The stored window of (rule, key), or None."""
        ...

    def put_window(self, rule_id: int, key: str, window: Any) -> None: ...

    def put_appended(self, rule_id: int, key: str, window: Any) -> None:
        """put_window of a window this store handed out and the engine only appended to
        (the repeat path): a store that keeps the object itself may note the appends
        rather than the window."""
        ...

    def delete_window(self, rule_id: int, key: str) -> None: ...

    def windows(self) -> Iterable[tuple[int, str, Any]]:
        """Every stored (rule_id, key, window); the engine may put/delete while iterating."""
        ...

    def delete_rule_windows(self, rule_id: int) -> None:
        """Drop every window of one rule."""
        ...

    def clear_windows(self) -> None:
        """Drop every window of every rule."""
        ...

    def is_seen(self, transaction_id: str) -> bool: ...

    def put_seen(self, transaction_id: str, event_time: int) -> None: ...

    def expire_seen(self, before_ms: int) -> int | None:
        """Forget the ids whose eventTime < before_ms; return the oldest eventTime kept."""
        ...

    def get_meta(self, name: str) -> Any | None: ...

    def put_meta(self, name: str, value: Any) -> None: ...


class MemoryStore:
    """WindowStore in dicts. With `pickled=True` every window and meta value is stored and
    returned as a pickle round trip, like a Spark store: tests then catch a change the engine
    forgot to put back and any state that is not plain picklable data."""

    def __init__(self, pickled: bool = False) -> None:
        self.pickled = pickled
        self.by_rule: dict[int, dict[str, Any]] = {}
        self.seen: dict[str, int] = {}
        # the ids by the second of their eventTime, and a min-heap of those seconds: what
        # expiry visits in time order (a heap of (eventTime, id) tuples cost ~64 B per id)
        self._seen_by_second: dict[int, list[str]] = {}
        self._seen_seconds: list[int] = []
        self.meta: dict[str, Any] = {}

    def _in(self, value: Any) -> Any:
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL) if self.pickled else value

    def _out(self, value: Any) -> Any:
        return pickle.loads(value) if self.pickled and value is not None else value

    def get_window(self, rule_id: int, key: str) -> Any | None:
        return self._out(self.by_rule.get(rule_id, {}).get(key))

    def put_window(self, rule_id: int, key: str, window: Any) -> None:
        self.by_rule.setdefault(rule_id, {})[key] = self._in(window)

    def put_appended(self, rule_id: int, key: str, window: Any) -> None:
        self.put_window(rule_id, key, window)

    def delete_window(self, rule_id: int, key: str) -> None:
        keys = self.by_rule.get(rule_id)
        if keys is not None:
            keys.pop(key, None)
            if not keys:
                del self.by_rule[rule_id]

    def windows(self) -> Iterable[tuple[int, str, Any]]:
        snapshot = [
            (rule_id, key, window)
            for rule_id, keys in self.by_rule.items()
            for key, window in keys.items()
        ]
        return ((rule_id, key, self._out(window)) for rule_id, key, window in snapshot)

    def delete_rule_windows(self, rule_id: int) -> None:
        self.by_rule.pop(rule_id, None)

    def clear_windows(self) -> None:
        self.by_rule.clear()

    def is_seen(self, transaction_id: str) -> bool:
        return transaction_id in self.seen

    def put_seen(self, transaction_id: str, event_time: int) -> None:
        self.seen[transaction_id] = event_time
        second = event_time // 1000
        ids = self._seen_by_second.get(second)
        if ids is None:
            ids = self._seen_by_second[second] = []
            heapq.heappush(self._seen_seconds, second)
        ids.append(transaction_id)

    def expire_seen(self, before_ms: int) -> int | None:
        seconds, by_second, seen = self._seen_seconds, self._seen_by_second, self.seen
        while seconds:
            second = seconds[0]
            kept: list[str] = []
            for transaction_id in by_second[second]:
                event_time = seen.get(transaction_id)
                if event_time is None or event_time // 1000 != second:
                    continue  # forgotten, or put again at another time (listed there too)
                if event_time < before_ms:
                    del seen[transaction_id]
                else:
                    kept.append(transaction_id)
            if kept:
                by_second[second] = kept
                return min(seen[transaction_id] for transaction_id in kept)
            heapq.heappop(seconds)
            del by_second[second]
        return None

    def get_meta(self, name: str) -> Any | None:
        return self._out(self.meta.get(name))

    def put_meta(self, name: str, value: Any) -> None:
        self.meta[name] = self._in(value)

    def window_count(self) -> int:
        """Number of stored (rule, key) windows (for tests and state-size reports)."""
        return sum(len(keys) for keys in self.by_rule.values())
