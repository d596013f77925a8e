"""An in-memory WindowStore that logs its changes, so a long-lived engine can be made durable
by writing each micro-batch's changes (and now and then a snapshot) instead of its state.

The engine's store protocol has a few bulk operations (drop one rule's windows, drop all,
forget old transaction ids) besides puts and deletes, so the log is the ordered list of
mutating calls; replaying it on a snapshot gives the same store. Values are pickled when the
log is taken, at the end of a batch: the engine puts a window back after every change, so
the last put of a key carries its final value, which is all a replay needs.
"""

from __future__ import annotations

import pickle
from typing import Any

from spark_jobs.fraud.store import MemoryStore

Change = tuple[Any, ...]

_PUT_WINDOW, _DELETE_WINDOW, _DELETE_RULE, _CLEAR = "pw", "dw", "dr", "cl"
_PUT_SEEN, _EXPIRE_SEEN, _PUT_META = "ps", "es", "pm"


class LoggedStore(MemoryStore):
    """MemoryStore whose mutations since the last `take_changes` can be replayed elsewhere."""

    def __init__(self) -> None:
        super().__init__(pickled=False)
        self._log: list[Change] = []

    def put_window(self, rule_id: int, key: str, window: Any) -> None:
        super().put_window(rule_id, key, window)
        self._log.append((_PUT_WINDOW, rule_id, key, window))

    def delete_window(self, rule_id: int, key: str) -> None:
        super().delete_window(rule_id, key)
        self._log.append((_DELETE_WINDOW, rule_id, key))

    def delete_rule_windows(self, rule_id: int) -> None:
        super().delete_rule_windows(rule_id)
        self._log.append((_DELETE_RULE, rule_id))

    def clear_windows(self) -> None:
        super().clear_windows()
        self._log.append((_CLEAR,))

    def put_seen(self, transaction_id: str, event_time: int) -> None:
        super().put_seen(transaction_id, event_time)
        self._log.append((_PUT_SEEN, transaction_id, event_time))

    def expire_seen(self, before_ms: int) -> int | None:
        self._log.append((_EXPIRE_SEEN, before_ms))
        return super().expire_seen(before_ms)

    def put_meta(self, name: str, value: Any) -> None:
        super().put_meta(name, value)
        self._log.append((_PUT_META, name, value))

    def take_changes(self) -> bytes:
        """The changes since the last call, serialised (values as they are now)."""
        log, self._log = self._log, []
        return pickle.dumps(log, protocol=pickle.HIGHEST_PROTOCOL)

    def discard_changes(self) -> None:
        self._log = []

    def apply_changes(self, changes: bytes) -> None:
        """Replay a batch's changes (from take_changes) without logging them again."""
        for change in pickle.loads(changes):
            op, args = change[0], change[1:]
            if op == _PUT_WINDOW:
                MemoryStore.put_window(self, *args)
            elif op == _DELETE_WINDOW:
                MemoryStore.delete_window(self, *args)
            elif op == _DELETE_RULE:
                MemoryStore.delete_rule_windows(self, *args)
            elif op == _CLEAR:
                MemoryStore.clear_windows(self)
            elif op == _PUT_SEEN:
                MemoryStore.put_seen(self, *args)
            elif op == _EXPIRE_SEEN:
                MemoryStore.expire_seen(self, *args)
            elif op == _PUT_META:
                MemoryStore.put_meta(self, *args)
            else:
                raise ValueError(f"unknown change {op!r} in a fraud state log")

    def snapshot(self) -> bytes:
        """The whole state (windows, seen ids, meta), serialised."""
        return pickle.dumps((self.by_rule, self.seen, self.meta), protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def restore(cls, snapshot: bytes | None) -> LoggedStore:
        """A store holding a snapshot's state (an empty one for None), with an empty log."""
        store = cls()
        if snapshot is not None:
            by_rule, seen, meta = pickle.loads(snapshot)
            store.by_rule, store.meta = by_rule, meta
            for transaction_id, event_time in seen.items():
                MemoryStore.put_seen(store, transaction_id, event_time)
        return store
