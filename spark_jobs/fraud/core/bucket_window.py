"""The seed's pre-aggregation of a (rule, key)'s window (`fraud.bucket` > 0): event times and
window starts are floored to the bucket, and each bucket keeps (sum, count, min, max), the
`Summary` every aggregator answers from, so the state grows with the number of buckets instead
of transactions. The exact representation, and the interface both share, are in windows.py.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from decimal import Decimal
from typing import Any

from spark_jobs.fraud.core.aggregates import EXACT, Aggregator, exact_sum


class BucketWindow:
    """Per-bucket partial aggregates (sum, count, min, max) as parallel lists sorted by the
    bucket start; a bucket [b, b + bucket_ms) is in the window ending at T when
    floor(T - w) <= b <= floor(T)."""

    __slots__ = ("bucket_ms", "counts", "maxs", "mins", "starts", "sums")

    def __init__(self, bucket_ms: int, state: Any = None) -> None:
        self.bucket_ms = bucket_ms
        if state is None:
            state = ([], [], [], [], [])
        self.starts: list[int]
        self.sums: list[str]
        self.counts: list[int]
        self.mins: list[str]
        self.maxs: list[str]
        self.starts, self.sums, self.counts, self.mins, self.maxs = state

    def floor(self, event_time: int) -> int:
        return event_time - event_time % self.bucket_ms

    def add(self, event_time: int, value: Decimal, text: str | None = None) -> None:
        start = self.floor(event_time)
        index = bisect_left(self.starts, start)
        if index < len(self.starts) and self.starts[index] == start:
            self.sums[index] = str(EXACT.add(Decimal(self.sums[index]), value))
            self.counts[index] += 1
            if value < Decimal(self.mins[index]):
                self.mins[index] = str(value)
            if value > Decimal(self.maxs[index]):
                self.maxs[index] = str(value)
            return
        if text is None:
            text = str(value)
        self.starts.insert(index, start)
        self.sums.insert(index, text)
        self.counts.insert(index, 1)
        self.mins.insert(index, text)
        self.maxs.insert(index, text)

    def aggregate(self, aggregator: Aggregator, event_time: int, window_ms: int) -> Decimal | None:
        start = bisect_left(self.starts, self.floor(event_time - window_ms))
        end = bisect_right(self.starts, self.floor(event_time), lo=start)
        if start == end:
            return None
        return aggregator.of_buckets(_Buckets(self, start, end))

    def count_in(self, event_time: int, window_ms: int) -> int:
        start = bisect_left(self.starts, self.floor(event_time - window_ms))
        end = bisect_right(self.starts, self.floor(event_time), lo=start)
        return sum(self.counts[start:end])

    def expire(self, earliest_event_time: int, window_ms: int) -> bool:
        bound, starts = self.floor(earliest_event_time - window_ms), self.starts
        if not starts or starts[0] >= bound:
            return False  # nothing to cut (the common case), known without a search
        cut = bisect_left(starts, bound)  # at least 1: starts[0] is cut
        for column in (self.starts, self.sums, self.counts, self.mins, self.maxs):
            del column[:cut]
        return True

    def first_end(self) -> int | None:
        return self.starts[0] + self.bucket_ms if self.starts else None

    def __len__(self) -> int:
        return len(self.starts)

    def state(self) -> tuple[list[int], list[str], list[int], list[str], list[str]]:
        return (self.starts, self.sums, self.counts, self.mins, self.maxs)


class _Buckets:
    """The `Summary` of buckets [start, end) of a BucketWindow, combined on demand."""

    __slots__ = ("end", "start", "window")

    def __init__(self, window: BucketWindow, start: int, end: int) -> None:
        self.window, self.start, self.end = window, start, end

    def total(self) -> Decimal:
        return exact_sum(list(map(Decimal, self.window.sums[self.start:self.end])))

    def count(self) -> int:
        return sum(self.window.counts[self.start:self.end])

    def minimum(self) -> Decimal:
        return min(map(Decimal, self.window.mins[self.start:self.end]))

    def maximum(self) -> Decimal:
        return max(map(Decimal, self.window.maxs[self.start:self.end]))
