"""The MIN or MAX of a long exact window's newest entries, without visiting them all.

A transaction's window ends at its own event time, so when transactions arrive in event-time
order the window is a suffix of the entries: everything from some start on. For each start,
the suffix's extreme is one of few candidates: the entries no later entry beats. Keeping
those (a monotonic stack) makes a MIN or MAX over a long window a binary search instead of
a Decimal per entry: at 10k transactions/s a key's 45-minute window holds hundreds of
entries, and every transaction of the key evaluated all of them.

Kept only in memory beside a window's entries (never stored), like the running sums; a value
inserted before the end makes the owner drop it, and it is rebuilt when next needed.
"""

from __future__ import annotations

import operator
from bisect import bisect_left
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from spark_jobs.fraud.core.aggregates import decimal_of_text

Pick = Callable[[Sequence[Any]], Any]  # min or max


class SuffixExtremes:
    """Candidates of one window for `pick`: positions (counted from the window's first entry
    ever, so that cuts at the front keep them valid) and their values. Each candidate is
    beaten by no later entry; equal later entries do not beat it, so the first extreme is
    the one found, as pick returns it."""

    __slots__ = ("_beats", "_first", "_length", "_offset", "pick", "positions", "values")

    def __init__(self, pick: Pick, texts: Sequence[str], first: int = 0) -> None:
        """The candidates of the entries from index `first` on: a window's older entries
        (kept for late transactions) are in no window ending at its newest entry."""
        self.pick = pick
        self._beats = operator.lt if pick is max else operator.gt
        self.positions: list[int] = []
        self.values: list[Decimal] = []
        self._offset = 0  # position of the window's current first entry
        self._first = first  # the first position the candidates cover
        self._length = first  # position the next entry appended gets
        for index in range(first, len(texts)):
            self.append(decimal_of_text(texts[index]))

    def append(self, value: Decimal, text: str | None = None) -> bool:
        """Extend by a value appended at the end (always possible: True); its text is for
        RunningSums, the other index a window may keep."""
        values, positions, beaten_by = self.values, self.positions, self._beats
        while values and beaten_by(values[-1], value):
            values.pop()
            positions.pop()
        values.append(value)
        positions.append(self._length)
        self._length += 1
        return True

    def cut(self, count: int) -> None:
        """Forget the first `count` entries (expired from the window)."""
        self._offset += count
        drop = bisect_left(self.positions, self._offset)
        if drop:
            del self.positions[:drop]
            del self.values[:drop]

    def covers(self, start: int) -> bool:
        """Whether the entries from index `start` on are all covered."""
        return self._offset + start >= self._first

    def of_suffix(self, start: int) -> Decimal:
        """pick over the entries from index `start` (of the current window, covered) to the
        end."""
        return self.values[bisect_left(self.positions, self._offset + start)]
