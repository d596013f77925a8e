"""An in-memory WindowStore that logs its changes, so a long-lived engine can be made durable
by writing each micro-batch's changes (and now and then a snapshot) instead of its state.

The engine's store protocol has a few bulk operations (drop one rule's windows, drop all,
forget old transaction ids) besides puts and deletes, so the log is the ordered list of
mutating calls; replaying it on a snapshot gives the same store. Window puts are not logged
one by one (the engine puts a window back after every change, several per transaction): a put
records the window as put (the same object, changed in place later), a removal takes it out
again, and the log ends with each window so recorded, as it is when the log is taken. That
replays to the same store because the other window operations only remove windows: a window
present at the end and put gets its final value, one present and not put was neither put nor
removed, and one removed after its last put is removed by the replayed removal.

A window the engine only appended to in place (`put_appended`, nearly every repeat visit of a
key) is not put: its change since the log last took it is taken at once, while the window is
in cache, into a column change (WindowDeltas) that goes into the log before the next removal
of any window, else ahead of the windows put. Looking the window up again in the store and
in the put windows, and visiting it again when the log is taken (by then out of cache), cost
a few per cent of an engine's CPU (BENCHMARKS.md, twelfth session). Each delta is relative
to what the log held of the window when it was taken, so the deltas of one window chain in
log order, and a put of it later in the batch logs only what changed after them.

Between two takes, windows change only through put_window, put_appended, delete_window,
delete_rule_windows and clear_windows; so `apply_changes` and `restore`, which write the
dicts directly, are for a store with nothing pending (a new one, or one just taken).
"""

from __future__ import annotations

import pickle
from array import array
from sys import intern
from typing import Any

from spark_jobs.fraud.core.store import MemoryStore
from spark_jobs.fraud.core.windows import ExactWindow, exact_entries

Change = tuple[Any, ...]

_PUT_WINDOW, _DELETE_WINDOW, _DELETE_RULE, _CLEAR = "pw", "dw", "dr", "cl"
_EXTEND_WINDOW = "xw"  # an exact window's entries cut from the front and appended
_EXTEND_WINDOWS = "xws"  # the same for many windows, in columns (WindowDeltas)
_EXACT_WINDOWS = "ew"  # exact windows put whole, in columns (ExactWindows)
_PUT_SEEN, _EXPIRE_SEEN, _PUT_META = "ps", "es", "pm"
_PUT_SEEN_MANY = "pss"  # seen ids put one after the other, in columns
# Logs written before the column forms ("xw", "ps" one per change) still replay.


class LoggedStore(MemoryStore):
    """MemoryStore whose mutations since the last `take_changes` can be replayed elsewhere."""

    def __init__(self) -> None:
        super().__init__(pickled=False)
        self._log: list[Change] = []  # every mutation but window puts, in order
        # per rule, the windows put since the log, as put (key -> window): a removal takes
        # its key out, so that taking the log visits no stored window again
        self._dirty: dict[int, dict[str, Any]] = {}
        # seen ids put since the last logged change that reads them (an expiry), in order:
        # logged as one change, a tuple per id costing as much to pickle as to evaluate
        self._seen_ids: list[str] = []
        self._seen_times: list[int] = []
        self._appended = WindowDeltas()  # put_appended's deltas not yet in the log

    def get_window(self, rule_id: int, key: str) -> Any | None:
        keys = self.by_rule.get(rule_id)
        return None if keys is None else keys.get(key)

    def put_window(self, rule_id: int, key: str, window: Any) -> None:
        keys = self.by_rule.get(rule_id)
        if keys is None:
            keys = self.by_rule[rule_id] = {}
        if type(window) is ExactWindow and keys.get(key) is not window:
            window.forget_logged()  # new here: its changes are relative to nothing stored
        keys[key] = window
        dirty = self._dirty.get(rule_id)
        if dirty is None:
            dirty = self._dirty[rule_id] = {}
        dirty[key] = window

    def put_appended(self, rule_id: int, key: str, window: Any) -> None:
        """The window stored under (rule_id, key), changed in place: its delta is logged now
        (module docstring); one the log must take whole is put as any other."""
        delta = window.take_log_delta() if type(window) is ExactWindow else None
        if delta is None:
            if type(window) is ExactWindow:
                window.forget_logged()  # taking it marked it logged: whole, as before
            self.put_window(rule_id, key, window)
            return
        cut, times, values = delta  # WindowDeltas.add, inlined: this runs for most appends
        appended = self._appended
        appended.rule_ids.append(rule_id)
        appended.keys.append(key)
        appended.lengths.append(len(times))
        appended.times.extend(times)
        appended.values.extend(values)
        appended.cuts.append(cut)

    def _log_appended(self) -> None:
        """put_appended's deltas so far, as one change (before one that removes a window)."""
        if self._appended.keys:
            self._log.append((_EXTEND_WINDOWS, *self._appended.packed()))
            self._appended = WindowDeltas()

    def delete_window(self, rule_id: int, key: str) -> None:
        super().delete_window(rule_id, key)
        dirty = self._dirty.get(rule_id)
        if dirty is not None:
            dirty.pop(key, None)
        self._log_appended()
        self._log.append((_DELETE_WINDOW, rule_id, key))

    def delete_rule_windows(self, rule_id: int) -> None:
        super().delete_rule_windows(rule_id)
        self._dirty.pop(rule_id, None)
        self._log_appended()
        self._log.append((_DELETE_RULE, rule_id))

    def clear_windows(self) -> None:
        super().clear_windows()
        self._dirty.clear()
        self._log_appended()
        self._log.append((_CLEAR,))

    def put_seen(self, transaction_id: str, event_time: int) -> None:
        super().put_seen(transaction_id, event_time)
        self._seen_ids.append(transaction_id)
        self._seen_times.append(event_time)

    def _log_seen(self) -> None:
        """The seen ids put since the last time, as one change (before one that reads them)."""
        if self._seen_ids:
            self._log.append((_PUT_SEEN_MANY, self._seen_ids, _int64(self._seen_times)))
            self._seen_ids, self._seen_times = [], []

    def expire_seen(self, before_ms: int) -> int | None:
        self._log_seen()
        self._log.append((_EXPIRE_SEEN, before_ms))
        return super().expire_seen(before_ms)

    def put_meta(self, name: str, value: Any) -> None:
        super().put_meta(name, value)
        self._log.append((_PUT_META, name, value))

    def take_changes(self) -> bytes:
        """The changes since the last call, serialised (values as they are now)."""
        self._log_seen()
        self._log_appended()  # before the windows put: a window's deltas chain in log order
        log, self._log = self._log, []
        dirty, self._dirty = self._dirty, {}
        exact, deltas = ExactWindows(), WindowDeltas()
        # the appends of ExactWindows and WindowDeltas bound once: this loop visits every
        # window put since the last time, most of them new keys' one-entry windows, and
        # method calls per window were a third of its cost (BENCHMARKS.md)
        exact_rule, exact_key = exact.rule_ids.append, exact.keys.append
        exact_length, exact_time, exact_value = (exact.lengths.append, exact.times.append,
                                               exact.values.append)
        exact_times, exact_values = exact.times.extend, exact.values.extend
        delta_rule, delta_key, delta_length, delta_cut = (
            deltas.rule_ids.append, deltas.keys.append, deltas.lengths.append,
            deltas.cuts.append)
        delta_times, delta_values = deltas.times.extend, deltas.values.extend
        for rule_id, windows in dirty.items():
            for key, window in windows.items():
                kind = type(window)
                if kind is tuple and type(window[0]) is int:  # one exact entry
                    exact_rule(rule_id)
                    exact_key(key)
                    exact_length(1)
                    exact_time(window[0])
                    exact_value(window[1])
                elif kind is ExactWindow:
                    delta = window.take_log_delta()
                    if delta is None:  # the whole window
                        times, values = window.entries()
                        exact_rule(rule_id)
                        exact_key(key)
                        exact_length(len(times))
                        exact_times(times)
                        exact_values(values)
                    elif delta[0] or delta[1]:  # its changes since the last take
                        cut, times, values = delta
                        delta_rule(rule_id)
                        delta_key(key)
                        delta_length(len(times))
                        delta_times(times)
                        delta_values(values)
                        delta_cut(cut)
                else:
                    log.append((_PUT_WINDOW, rule_id, key, window))
        if deltas.keys:
            log.append((_EXTEND_WINDOWS, *deltas.packed()))
        if exact.keys:
            log.append((_EXACT_WINDOWS, *exact.packed()))
        return pickle.dumps(log, protocol=pickle.HIGHEST_PROTOCOL)

    def apply_changes(self, changes: bytes) -> set[tuple[int, str]]:
        """Replay a batch's changes (from take_changes) without logging them again, on a store
        with no changes pending (module docstring); the (rule, key) windows it put."""
        put: set[tuple[int, str]] = set()
        for change in pickle.loads(changes):
            op, args = change[0], change[1:]
            if op == _PUT_WINDOW:
                MemoryStore.put_window(self, *args)
                put.add(args[:2])
            elif op == _EXTEND_WINDOW:
                self._extend_window(*args)
                put.add(args[:2])
            elif op == _EXTEND_WINDOWS:
                for rule_id, key, cut, times, values in unpacked_deltas(*args):
                    self._extend_window(rule_id, key, cut, times, values)
                    put.add((rule_id, key))
            elif op == _EXACT_WINDOWS:
                for rule_id, key, state in stored_states(*args):
                    MemoryStore.put_window(self, rule_id, key, state)
                    put.add((rule_id, key))
            elif op == _DELETE_WINDOW:
                MemoryStore.delete_window(self, *args)
            elif op == _DELETE_RULE:
                MemoryStore.delete_rule_windows(self, *args)
            elif op == _CLEAR:
                MemoryStore.clear_windows(self)
            elif op == _PUT_SEEN:
                MemoryStore.put_seen(self, *args)
            elif op == _PUT_SEEN_MANY:
                ids, times = args
                for transaction_id, event_time in zip(ids, array("q", times).tolist(),
                                                      strict=True):
                    MemoryStore.put_seen(self, transaction_id, event_time)
            elif op == _EXPIRE_SEEN:
                MemoryStore.expire_seen(self, *args)
            elif op == _PUT_META:
                MemoryStore.put_meta(self, *args)
            else:
                raise ValueError(f"unknown change {op!r} in a fraud state log")
        return put

    def _extend_window(self, rule_id: int, key: str, cut: int, times: list[int],
                       values: list[str]) -> None:
        stored = self.by_rule.get(rule_id, {}).get(key)
        if stored is None:
            raise ValueError(f"a fraud state log extends window {rule_id} {key}, which the "
                             "state it is replayed on does not have")
        if type(stored) is tuple and type(stored[0]) is int:  # one entry: into lists
            stored = exact_entries(stored)
            MemoryStore.put_window(self, rule_id, key, stored)
        if type(stored) is tuple:  # as replayed or restored: its lists, changed in place
            kept_times, kept_values = stored
            del kept_times[:cut]
            del kept_values[:cut]
            kept_times.extend(times)
            kept_values.extend(values)
            if len(kept_times) == 1:  # one entry left: stored as the engine stores it
                MemoryStore.put_window(self, rule_id, key, (kept_times[0], kept_values[0]))
            return
        window = ExactWindow.load(stored)
        window.apply_log_delta(cut, times, values)
        MemoryStore.put_window(self, rule_id, key, window)

    def snapshot(self) -> bytes:
        """The whole state (windows, seen ids, meta), serialised."""
        windows = {rule_id: {key: plain_state(window) for key, window in by_key.items()}
                   for rule_id, by_key in self.by_rule.items()}
        return pickle.dumps((windows, self.seen, self.meta), protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def restore(cls, snapshot: bytes | None) -> LoggedStore:
        """A store holding a snapshot's state (an empty one for None), with an empty log."""
        store = cls()
        if snapshot is not None:
            by_rule, seen, meta = pickle.loads(snapshot)
            store.by_rule, store.meta = by_rule, meta
            shared = _shared_times(by_rule)
            for transaction_id, event_time in seen.items():
                MemoryStore.put_seen(store, transaction_id, shared(event_time, event_time))
        return store


def _shared_times(by_rule: dict[int, dict[str, Any]]) -> Any:
    """Make equal event times of the restored exact windows one object, as in the live
    engine (pickle writes each int out, so a snapshot restores one per entry, 32 B each);
    returns the setdefault that shares further times the same way."""
    same: dict[int, int] = {}
    shared = same.setdefault
    pairs: dict[int, tuple[tuple[int, str], tuple[int, str]]] = {}  # id -> (old, new)
    for by_key in by_rule.values():
        for key, state in by_key.items():
            if type(state) is not tuple or len(state) != 2:
                continue  # a bucket window's state
            times = state[0]
            if type(times) is not int:
                times[:] = map(shared, times, times)
                continue
            # one entry: a pair the rules of one transaction shared stays one pair
            known = pairs.get(id(state))
            if known is None:
                known = pairs[id(state)] = (state, (shared(times, times), state[1]))
            by_key[key] = known[1]
    return shared


def plain_state(window: Any) -> Any:
    """A window as plain lists, or its one entry as a pair (as a new window is stored):
    pickles much faster than the object."""
    if type(window) is not ExactWindow:
        return window
    times, values = window.entries()
    return (times[0], values[0]) if len(times) == 1 else (times, values)


class ExactWindows:
    """Exact windows logged whole, as one change of a few flat columns: pickling a tuple and
    two lists per window (most windows of a batch are new) cost as much as evaluating the
    transactions. Windows logged before are logged by their delta (WindowDeltas,
    _EXTEND_WINDOWS). LoggedStore.take_changes fills the columns."""

    def __init__(self) -> None:
        self.rule_ids: list[int] = []
        self.keys: list[str] = []
        self.lengths: list[int] = []
        self.times: list[int] = []
        self.values: list[str] = []

    def packed(self) -> tuple[Any, ...]:
        """(rule ids, key lengths, keys joined, entries per window, times as an int64 array,
        values joined by ','): small ints pickle compactly and fast as they are; a value is a
        decimal's str(), which has no comma."""
        return (self.rule_ids, list(map(len, self.keys)), "".join(self.keys), self.lengths,
                _int64(self.times), ",".join(self.values))


class WindowDeltas(ExactWindows):
    """Exact windows logged by their changes (take_log_delta), in the same columns plus the
    entries cut from each window's front."""

    def __init__(self) -> None:
        super().__init__()
        self.cuts: list[int] = []

    def packed(self) -> tuple[Any, ...]:
        return (*super().packed(), self.cuts)


def unpacked_deltas(*packed: Any) -> list[tuple[int, str, int, list[int], list[str]]]:
    """WindowDeltas.packed() back as (rule_id, key, cut, times, values) per window."""
    *columns, cuts = packed
    return [(rule_id, key, cut, times, values) for (rule_id, key, times, values), cut
            in zip(unpacked(*columns), cuts, strict=True)]


def stored_states(rule_ids: list[int], key_lengths: list[int], keys: str, lengths: list[int],
                  times: bytes, values: str) -> list[tuple[int, str, tuple[Any, Any]]]:
    """ExactWindows.packed() back as (rule_id, key, stored state) per window: its (times,
    values) lists, or its one entry as the (time, value) pair the engine starts it as."""
    all_times, all_values = _entries(times, values)
    found: list[tuple[int, str, tuple[Any, Any]]] = []
    key_at, at = 0, 0
    for rule_id, key_length, length in zip(rule_ids, key_lengths, lengths, strict=True):
        end = at + length
        found.append((rule_id, keys[key_at:key_at + key_length],
                      (all_times[at], all_values[at]) if length == 1
                      else (all_times[at:end], all_values[at:end])))
        key_at, at = key_at + key_length, end
    return found


def unpacked(rule_ids: list[int], key_lengths: list[int], keys: str, lengths: list[int],
             times: bytes, values: str) -> list[tuple[int, str, list[int], list[str]]]:
    """ExactWindows.packed() back as (rule_id, key, times, values) per window."""
    all_times, all_values = _entries(times, values)
    found, key_at, at = [], 0, 0
    for rule_id, key_length, length in zip(rule_ids, key_lengths, lengths, strict=True):
        found.append((rule_id, keys[key_at:key_at + key_length],
                      all_times[at:at + length], all_values[at:at + length]))
        key_at, at = key_at + key_length, at + length
    return found


def _entries(times: bytes, values: str) -> tuple[list[int], list[str]]:
    """The packed entries' times and value texts, each distinct one a single object, as a
    live engine keeps them: a transaction's time and amount in every rule's window, and
    equal amounts interned (engine.py). One object per entry made a rebuilt state ~50 %
    larger than the live one it copies."""
    same_times: dict[int, int] = {}
    shared_time = same_times.setdefault
    listed = array("q", times).tolist()
    all_times = list(map(shared_time, listed, listed))
    return all_times, list(map(intern, values.split(","))) if values else []


def _int64(values: list[int]) -> bytes:
    return array("q", values).tobytes()
