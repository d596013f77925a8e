"""The fraud engine's clean-up timer (the seed's onTimer): what it drops, and when it is due.

retention.py says how long a window entry and a transaction id live; this finds them once
they are gone without visiting every window at every timer. The first clean-up of an engine
(and the first after a rule change, whose new widths make every due wrong) scans every window
and builds an index of their due watermarks (oldest entry's end + window + late retention,
due_index.py); later ones pop only the windows of the seconds that hold a due one. The engine
files a window's due as a value enters it, so the index can hold stale entries: each is
checked against the store.
The earliest due is kept in the store's meta, so a restarted engine sets its timer at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from spark_jobs.fraud.core.due_index import DueIndex
from spark_jobs.fraud.core.retention import Retention
from spark_jobs.fraud.core.rules import Rule
from spark_jobs.fraud.core.store import WindowStore
from spark_jobs.fraud.core.windows import Window

# Meta entries of the store.
SEEN_FLOOR = "seen_floor"  # ids of transactions older than this are forgotten
NEXT_CLEANUP = "next_cleanup"  # earliest watermark at which cleanup drops something

DUE = -(2**62)  # next_cleanup value meaning "as soon as possible"


class CleanupSchedule:
    """When clean-up next drops something, and the windows' due index that tells it what.

    `next_ms` (None: nothing to drop) and `dues`, the due index of every window (None until
    a full scan has built it), are read and pushed to by the engine's per-transaction loop.
    """

    def __init__(self, store: WindowStore, retention: Retention,
                 load_window: Callable[[Any], Window]) -> None:
        self.store = store
        self.retention = retention
        self._retention = retention.ms
        self._load_window = load_window
        self.seen_floor: int | None = store.get_meta(SEEN_FLOOR)
        self.next_ms: int | None = store.get_meta(NEXT_CLEANUP)
        # None until a full clean-up scan has built it. A long-lived engine then cleans by
        # popping instead of scanning every window (entries can be stale: each is checked
        # against the store).
        self.dues: DueIndex | None = None

    def reload(self) -> None:
        """Read the clocks again from the store (after a failed message or a replay)."""
        self.seen_floor = self.store.get_meta(SEEN_FLOOR)
        self.next_ms = self.store.get_meta(NEXT_CLEANUP)

    def index(self, windows: Iterable[tuple[int, str]], rules: dict[int, Rule]) -> None:
        """Add the stored `windows` to the due index, if there is one."""
        dues = self.dues
        if dues is None:
            return
        for rule_id, key in windows:
            rule, state = rules.get(rule_id), self.store.get_window(rule_id, key)
            if rule is not None and state is not None:
                first_end = self._load_window(state).first_end()
                if first_end is not None:
                    dues.push(first_end + rule.window_ms + self._retention, rule_id, key)

    def expires_at(self, watermark_ms: int) -> None:
        """Something can be dropped from watermark_ms on: the timer moves if that is sooner."""
        if self.next_ms is None or watermark_ms < self.next_ms:
            self.next_ms = watermark_ms
            self.store.put_meta(NEXT_CLEANUP, watermark_ms)

    def rescan(self) -> None:
        """The dues were computed with the old windows: scan again, as soon as possible."""
        self.dues = None
        self.next_ms = DUE
        self.store.put_meta(NEXT_CLEANUP, DUE)

    def run(self, watermark_ms: int, rules: dict[int, Rule]) -> None:
        """Drop what the retention rule lets go: window entries past eventTime + rule window +
        late retention, windows of rules that are gone (not in `rules`), and the ids of
        transactions beyond the late retention."""
        store, retention = self.store, self._retention
        if self.dues is None:
            next_cleanup = self._scan_windows(watermark_ms, rules)
        else:
            next_cleanup = self._pop_due_windows(watermark_ms, rules)
        floor = watermark_ms - retention  # older transactions are not admitted any more
        if self.seen_floor is None or floor > self.seen_floor:
            self.seen_floor = floor
            store.put_meta(SEEN_FLOOR, floor)
        oldest_seen = store.expire_seen(self.seen_floor)
        if oldest_seen is not None:
            due = oldest_seen + retention + 1
            next_cleanup = due if next_cleanup is None else min(next_cleanup, due)
        self.next_ms = next_cleanup
        store.put_meta(NEXT_CLEANUP, next_cleanup)

    def _trimmed(self, rules: dict[int, Rule], rule_id: int, key: str, state: Any,
                 watermark_ms: int) -> int | None:
        """Expire one stored window; its next due watermark, None when it is gone."""
        rule = rules.get(rule_id)
        if rule is None:
            self.store.delete_window(rule_id, key)
            return None
        window = self._load_window(state)
        earliest = self.retention.earliest(rule_id, rule.window_ms, watermark_ms)
        if window.expire(earliest, rule.window_ms):
            if not len(window):
                self.store.delete_window(rule_id, key)
                return None
            self.store.put_window(rule_id, key, window.state())
        first_end = window.first_end()
        assert first_end is not None
        return first_end + rule.window_ms + self._retention

    def _scan_windows(self, watermark_ms: int, rules: dict[int, Rule]) -> int | None:
        """Visit every window (a fresh engine, or after a rule change) and index what stays."""
        dues = DueIndex()
        for rule_id, key, state in list(self.store.windows()):
            due = self._trimmed(rules, rule_id, key, state, watermark_ms)
            if due is not None:
                dues.push(due, rule_id, key)
        self.dues = dues
        return dues.first_ms()

    def _pop_due_windows(self, watermark_ms: int, rules: dict[int, Rule]) -> int | None:
        """Visit only the windows of the seconds holding a due one (each once, however often
        it was filed: a replay files every window it put again)."""
        dues = self.dues
        assert dues is not None
        visited: set[tuple[int, str]] = set()
        for rule_id, key in dues.pop_due(watermark_ms):
            if (rule_id, key) in visited:
                continue
            visited.add((rule_id, key))
            state = self.store.get_window(rule_id, key)
            if state is None:
                continue  # deleted since (reset on fire, rule deleted, cleared)
            due = self._trimmed(rules, rule_id, key, state, watermark_ms)
            if due is not None:
                dues.push(max(due, watermark_ms + 1), rule_id, key)
        return dues.first_ms()

    def next_cleanup_ms(self, watermark_ms: int) -> int | None:
        """The next clean-up timer: `next_ms` rounded up to the second like the seed's timers,
        always after watermark_ms (one already due is due at the next second); None when there
        is nothing to clean."""
        if self.next_ms is None:
            return None
        at = max(self.next_ms, watermark_ms + 1)
        return -(-at // 1000) * 1000
