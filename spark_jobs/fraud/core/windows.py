"""The window state of one (rule, key): what a rule remembers of a key's transactions.

Two representations behind one small interface, both kept sorted by event time so that a
window is found with two binary searches and expiry is a prefix cut:

- `ExactWindow` keeps one (eventTime, value) entry per transaction: exact bounds
  `T - w <= eventTime <= T`, equal timestamps all counted.
- `BucketWindow` is the seed's pre-aggregation: event times and window starts are floored to
  the bucket, and each bucket keeps (sum, count, min, max), the `Summary` every aggregator
  answers from, so the state grows with the number of buckets instead of transactions.

Neither knows the aggregator functions: each window asks the `Aggregator` entry how to answer
from what it keeps.

Only values are kept (the seed's "event pruning"): the rule's field of each transaction, or a
1 for the COUNT_* fields. `state()` is plain data, lists of ints and of decimal strings, the
form a state store keeps; `load()` wraps it again without copying. An exact window holding one
entry, as every new key's window starts (most (rule, key) windows never get a second: each
payee-beneficiary pair's), is stored as the pair (eventTime, value text) instead: an object
and two lists cost ~300 B of memory more per window (BENCHMARKS.md, "one-entry windows").
Values are kept as their exact decimal text rather than Decimal objects because a Spark-backed
store pickles the state on every access: a list of strings pickles about ten times faster and
a third smaller than a list of Decimals, maps to a plain string column, and only the entries
of the window being aggregated are turned back into Decimals.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Protocol

from spark_jobs.fraud.core.aggregates import EXACT, Aggregator, exact_sum


class Window(Protocol):
    """One (rule, key)'s remembered values, sorted by event time."""

    def add(self, event_time: int, value: Decimal) -> None:
        """Remember one transaction's value."""
        ...

    def aggregate(self, aggregator: Aggregator, event_time: int, window_ms: int) -> Decimal | None:
        """The aggregate over the window ending at event_time (None when it holds no value)."""
        ...

    def count_in(self, event_time: int, window_ms: int) -> int:
        """How many values the window ending at event_time holds (a COUNT_* field's window
        holds only ones: its aggregate follows from this, aggregates.of_count)."""
        ...

    def expire(self, earliest_event_time: int, window_ms: int) -> bool:
        """Forget what no window ending at or after earliest_event_time can hold; True if any."""
        ...

    def first_end(self) -> int | None:
        """The event time just after the oldest entry: the oldest entry can be forgotten once
        windows end at or after first_end() + window_ms. None when empty."""
        ...

    def __len__(self) -> int: ...

    def state(self) -> Any:
        """Plain picklable data for a state store."""
        ...


class ExactWindow:
    """Individual (eventTime, value) entries as two parallel sorted lists.

    An aggregator that follows from the total and count (SUM, AVG: `Aggregator.of_sums`)
    comes, over a long window (a hot key's), from running sums kept beside the entries (built
    on first use, extended on appends, rebuilt after an insert in the middle), so evaluating
    a transaction costs a subtraction and a scan of small ints (the exponents) instead of
    re-adding every entry as a Decimal. The running sums are exact (unlimited precision) and
    only in memory: `state()` is unchanged. They are integers, the values scaled by
    10^_scale (the most decimal places among the window's values), kept 8 bytes each in an
    array while they fit 64 bits, else in a list (a Decimal each took 104 B, ~3 per
    transaction held with the demo rules). A finer value than the scale rebuilds them; the
    JSON gate bounds how fine (keys.MAX_ADJUSTED_EXPONENT).
    The difference is given the exponent the plain sum would have (the smallest of 0 and the
    window's values'), so 2.50 + 1.5 still reads 4.00, whatever came before the window.
    """

    __slots__ = ("_base", "_cut", "_exponents", "_logged", "_prefix", "_scale", "times",
                 "values")

    def __init__(self, times: list[int] | None = None, values: list[str] | None = None):
        self.times: list[int] = [] if times is None else times
        self.values: list[str] = [] if values is None else values
        # _prefix[i] = _base + values[0..i], scaled by 10^_scale
        self._prefix: array[int] | list[int] | None = None
        self._exponents: array[int] | list[int] = []
        self._base = 0
        self._scale = 0
        self._logged: int | None = None  # entries a change log holds; None: it must get all
        self._cut = 0  # entries cut from the front since the log last took this window

    @classmethod
    def load(cls, state: Any) -> ExactWindow:
        """The window itself (an in-memory store keeps it, running sums and all), or one
        wrapped around stored (times, values) lists, or around a stored one-entry pair."""
        if isinstance(state, ExactWindow):
            return state
        if state is None:
            return cls()
        first, second = state
        if type(first) is int:  # one entry, as a window starts (window_starter)
            return cls([first], [second])
        return cls(first, second)

    def __reduce__(self) -> tuple[type[ExactWindow], tuple[list[int], list[str]]]:
        return (ExactWindow, (self.times, self.values))  # pickled without the running sums

    def __eq__(self, other: object) -> bool:
        """Equal entries; a stored state (lists, or one entry) compares like the window it
        holds."""
        if isinstance(other, tuple) and len(other) == 2:
            return (self.times, self.values) == exact_entries(other)
        if not isinstance(other, ExactWindow):
            return NotImplemented
        return self.times == other.times and self.values == other.values

    __hash__ = None  # type: ignore[assignment]  # mutable

    def add(self, event_time: int, value: Decimal) -> None:
        index = bisect_right(self.times, event_time)
        if self._logged is not None and index < self._logged - self._cut:
            self._logged = None  # inserted among logged entries: log the whole window
        self.times.insert(index, event_time)
        self.values.insert(index, str(value))
        prefix = self._prefix
        if prefix is not None:
            exponent = _exponent(value)
            if index == len(prefix) and -exponent <= self._scale:
                total = (prefix[-1] if prefix else self._base) + _scaled(value, self._scale)
                try:
                    prefix.append(total)
                except OverflowError:  # beyond 64 bits: Python integers from now on
                    self._prefix = prefix = prefix.tolist()
                    prefix.append(total)
                self._exponents.append(exponent)
            else:
                self._prefix = None  # out of order or finer: rebuilt when next needed

    def _running_sums(self) -> array[int] | list[int]:
        if self._prefix is None:
            decimals = list(map(Decimal, self.values))
            exponents = [_exponent(value) for value in decimals]
            scale = max(0, -min(exponents, default=0))
            running, sums = 0, []
            for value in decimals:
                running += _scaled(value, scale)
                sums.append(running)
            try:
                prefix: array[int] | list[int] = array("q", sums)
            except OverflowError:
                prefix = sums
            self._prefix, self._exponents, self._base, self._scale = (
                prefix, array("i", exponents), 0, scale)
        return self._prefix

    def aggregate(self, aggregator: Aggregator, event_time: int, window_ms: int) -> Decimal | None:
        start = bisect_left(self.times, event_time - window_ms)
        end = bisect_right(self.times, event_time, lo=start)
        of_sums = aggregator.of_sums
        if end - start >= RUNNING_SUMS_FROM and of_sums is not None:
            prefix = self._running_sums()
            before = prefix[start - 1] if start else self._base
            exponent = min(0, min(self._exponents[start:end]))  # sum() starts from 0
            total = Decimal(prefix[end - 1] - before).scaleb(-self._scale, context=EXACT).quantize(
                _UNIT[exponent] if exponent in _UNIT else Decimal((0, (1,), exponent)),
                context=EXACT)
            return of_sums(total, end - start)
        if start == end:
            return None
        return aggregator.of_values(list(map(Decimal, self.values[start:end])))

    def count_in(self, event_time: int, window_ms: int) -> int:
        times = self.times
        start = bisect_left(times, event_time - window_ms)
        return bisect_right(times, event_time, lo=start) - start

    def expire(self, earliest_event_time: int, window_ms: int) -> bool:
        cut = bisect_left(self.times, earliest_event_time - window_ms)
        if cut:
            del self.times[:cut]
            del self.values[:cut]
            self._cut += cut
            if self._prefix is not None:
                self._base = self._prefix[cut - 1]
                del self._prefix[:cut]
                del self._exponents[:cut]
        return cut > 0

    def first_end(self) -> int | None:
        return self.times[0] + 1 if self.times else None

    def take_log_delta(self) -> tuple[int, list[int], list[str]] | None:
        """What changed since the change log last took this window: (entries cut from the
        front, entries appended), or None when the log needs the whole window. Marks the
        window as logged: a hot window is then logged by its new entries, not all of them."""
        logged, cut, times = self._logged, self._cut, self.times
        self._logged, self._cut = len(times), 0
        if logged is None:
            return None
        kept = logged - cut if logged > cut else 0
        return (cut, times[kept:], self.values[kept:])

    def forget_logged(self) -> None:
        """The change log must take the whole window next time (it is put somewhere new)."""
        self._logged, self._cut = None, 0

    def apply_log_delta(self, cut: int, times: list[int], values: list[str]) -> None:
        """Replay a take_log_delta() on the window as the log had it."""
        del self.times[:cut]
        del self.values[:cut]
        self.times.extend(times)
        self.values.extend(values)
        self._prefix = None

    def __len__(self) -> int:
        return len(self.times)

    def state(self) -> ExactWindow:
        return self  # pickles as (times, values): see __reduce__


RUNNING_SUMS_FROM = 16  # entries in the window; shorter ones are simply added up
_UNIT = {e: Decimal((0, (1,), e)) for e in range(-12, 4)}


def _scaled(value: Decimal, scale: int) -> int:
    """value * 10^scale, exact (value has at most `scale` decimal places)."""
    return int(value.scaleb(scale, context=EXACT))


def _exponent(value: Decimal) -> int:
    exponent = value.as_tuple().exponent
    if not isinstance(exponent, int):
        raise ValueError(f"not a finite amount: {value}")
    return exponent


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

    def add(self, event_time: int, value: Decimal) -> None:
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
        cut = bisect_left(self.starts, self.floor(earliest_event_time - window_ms))
        if cut:
            for column in (self.starts, self.sums, self.counts, self.mins, self.maxs):
                del column[:cut]
        return cut > 0

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


def window_starter(bucket_ms: int) -> Callable[[int, str], Any]:
    """The function making the stored state of a new window holding one entry (event time,
    value text), holding what loading None and adding it would hold: most transactions
    start a window for most rules (a new key), and this skips the empty window's searches
    and inserts. An exact one is stored as the pair itself (`ExactWindow.load` reads it)."""
    if bucket_ms <= 0:
        return lambda event_time, text: (event_time, text)

    def start(event_time: int, text: str) -> tuple[list[int], list[str], list[int], list[str],
                                                   list[str]]:
        start = event_time - event_time % bucket_ms
        return ([start], [text], [1], [text], [text])

    return start


def window_loader(bucket_ms: int) -> Callable[[Any], Window]:
    """The function turning stored state (or None) into a Window for this mode:
    exact when bucket_ms <= 0, else buckets of bucket_ms."""
    if bucket_ms <= 0:
        return ExactWindow.load
    return lambda state: BucketWindow(bucket_ms, state)


def window_size(state: Any) -> int:
    """Entries in one stored window state (individual values or buckets), for state-size
    reports: an exact window, or a stored state whose first list holds one event time per
    entry."""
    if isinstance(state, ExactWindow):
        return len(state)
    if state is not None and type(state[0]) is int:
        return 1  # an exact window's one entry
    return 0 if state is None else len(state[0])


def exact_entries(state: Any) -> tuple[list[int], list[str]]:
    """The (event times, value texts) of an exact window's stored state, whichever form it
    has (a window, its two lists, one entry, or None)."""
    if state is None:
        return [], []
    if isinstance(state, ExactWindow):
        return state.times, state.values
    first, second = state
    return ([first], [second]) if type(first) is int else (first, second)
