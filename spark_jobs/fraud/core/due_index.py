"""The clean-up's index of when each window is next due, filed by the second.

A window is due at the watermark where its oldest entry can go (cleanup.py). The index files
each (rule_id, key) under the second its due falls in, in a flat list per second, with a heap
of the seconds: ~16 B per window, where a heap of (due, rule_id, key) tuples cost ~72 B, one
per new window of a live engine (most transactions start one). Each second also keeps the
earliest due filed under it, so the next clean-up is known exactly. A clean-up visits every
window due by its watermark, and also those due later in a second that has one due: each
visit expires exactly what the watermark lets go, and files the window again. Entries may be
stale (the window changed or went since): the clean-up checks each against the store.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator


class DueIndex:
    """(rule_id, key) filed by due second; `pop_due` hands out those due at a watermark."""

    __slots__ = ("_by_second", "_earliest", "_seconds")

    def __init__(self) -> None:
        self._by_second: dict[int, list[int | str]] = {}  # rule_id, key, rule_id, key, ...
        self._seconds: list[int] = []  # min-heap of the keys of _by_second
        self._earliest: dict[int, int] = {}  # second -> the earliest due filed under it

    def push(self, due_ms: int, rule_id: int, key: str) -> None:
        """File a window due at watermark due_ms."""
        second = due_ms // 1000
        entries = self._by_second.get(second)
        if entries is None:
            entries = self._by_second[second] = []
            heapq.heappush(self._seconds, second)
            self._earliest[second] = due_ms
        elif due_ms < self._earliest[second]:
            self._earliest[second] = due_ms
        entries.append(rule_id)
        entries.append(key)

    def pop_due(self, watermark_ms: int) -> Iterator[tuple[int, str]]:
        """Take out every (rule_id, key) due at watermark_ms, with the others of its second.
        Those pushed while this runs are not taken."""
        seconds, by_second, earliest = self._seconds, self._by_second, self._earliest
        taken = []
        while seconds and earliest[seconds[0]] <= watermark_ms:
            second = heapq.heappop(seconds)
            del earliest[second]
            taken.append(by_second.pop(second))
        for entries in taken:
            for index in range(0, len(entries), 2):
                yield entries[index], entries[index + 1]  # type: ignore[misc]

    def first_ms(self) -> int | None:
        """The earliest due, None when empty."""
        return self._earliest[self._seconds[0]] if self._seconds else None

    def __len__(self) -> int:
        return sum(len(entries) for entries in self._by_second.values()) // 2
