"""The window state of one (rule, key): what a rule remembers of a key's transactions.

Two representations behind one small interface, both kept sorted by event time so that a
window is found with two binary searches and expiry is a prefix cut:

- `ExactWindow` keeps one (eventTime, value) entry per transaction: exact bounds
  `T - w <= eventTime <= T`, equal timestamps all counted.
- `BucketWindow` (bucket_window.py) is the seed's pre-aggregation: event times and window
  starts are floored to the bucket, and each bucket keeps (sum, count, min, max), the
  `Summary` every aggregator answers from, so the state grows with the number of buckets
  instead of transactions.

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

from bisect import bisect_left, bisect_right
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Protocol

from spark_jobs.fraud.core.aggregates import Aggregator, decimal_of_text, of_count
from spark_jobs.fraud.core.bucket_window import BucketWindow
from spark_jobs.fraud.core.running_sums import RunningSums
from spark_jobs.fraud.core.suffix_extremes import SuffixExtremes


class Window(Protocol):
    """One (rule, key)'s remembered values, sorted by event time."""

    def add(self, event_time: int, value: Decimal, text: str | None = None) -> None:
        """Remember one transaction's value (text: str(value), when the caller has it)."""
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

    A long window (a hot key's) answers from an index kept beside its entries, built on first
    use, extended on appends, dropped after an insert in the middle: an aggregator that
    follows from the total and count (SUM, AVG: `Aggregator.of_sums`) from running sums
    (running_sums.py), so evaluating a transaction costs a subtraction instead of re-adding
    every entry as a Decimal; MIN and MAX of a window ending at the newest entry from the
    candidates for its extreme (suffix_extremes.py), a binary search instead of a Decimal
    per entry. Both are exact and only in memory: `state()` is unchanged.

    Expired entries leave the front in one go once they are an eighth of the lists
    (`_head` counts them until then): a hot key's window of tens of thousands of entries,
    cut by one at every transaction of the key, moved all of them each time.

    `add` takes the value's text from the caller, which makes it once per transaction and
    field: every rule's window of that transaction then holds the same string (one text per
    rule was ~440 B per transaction held with the demo rules; BENCHMARKS.md).
    """

    __slots__ = ("_cut", "_head", "_index", "_logged", "_times", "_values")

    def __init__(self, times: list[int] | None = None, values: list[str] | None = None):
        self._times: list[int] = [] if times is None else times
        self._values: list[str] = [] if values is None else values
        self._head = 0  # expired entries still at the front of _times and _values
        self._index: RunningSums | SuffixExtremes | None = None
        self._logged: int | None = None  # entries a change log holds; None: it must get all
        self._cut = 0  # entries cut from the front since the log last took this window

    @classmethod
    def load(cls, state: Any) -> ExactWindow:
        """The window itself (an in-memory store keeps it, its index and all), or one
        wrapped around stored (times, values) lists, or around a stored one-entry pair."""
        if isinstance(state, ExactWindow):
            return state
        if state is None:
            return cls()
        first, second = state
        if type(first) is int:  # one entry, as a window starts (window_starter)
            return cls([first], [second])
        return cls(first, second)

    def entries(self) -> tuple[list[int], list[str]]:
        """The entries' event times and value texts, oldest first (the lists themselves,
        their expired front dropped first)."""
        head = self._head
        if head:
            del self._times[:head]
            del self._values[:head]
            self._head = 0
        return self._times, self._values

    @property
    def times(self) -> list[int]:
        return self.entries()[0]

    @property
    def values(self) -> list[str]:
        return self.entries()[1]

    def __reduce__(self) -> tuple[type[ExactWindow], tuple[list[int], list[str]]]:
        return (ExactWindow, self.entries())  # pickled without its index

    def __eq__(self, other: object) -> bool:
        """Equal entries; a stored state (lists, or one entry) compares like the window it
        holds."""
        if isinstance(other, tuple) and len(other) == 2:
            return self.entries() == exact_entries(other)
        if not isinstance(other, ExactWindow):
            return NotImplemented
        return self.times == other.times and self.values == other.values

    __hash__ = None  # type: ignore[assignment]  # mutable

    def add(self, event_time: int, value: Decimal, text: str | None = None) -> None:
        """text: str(value), when the caller has it (shared by every window it goes to)."""
        times, head = self._times, self._head
        # in event-time order (the common case) an entry goes at the end: no search
        index = len(times) if not times or event_time >= times[-1] else bisect_right(
            times, event_time, lo=head)
        if self._logged is not None and index - head < self._logged - self._cut:
            self._logged = None  # inserted among logged entries: log the whole window
        accelerated = self._index
        if accelerated is not None and (
                index != len(times) or not accelerated.append(value, text)):
            self._index = None  # out of order, or finer than the sums: rebuilt when needed
        times.insert(index, event_time)
        self._values.insert(index, str(value) if text is None else text)

    def append_aggregate(self, event_time: int, value: Decimal, text: str, bound: int,
                         window_ms: int, aggregator: Aggregator | None, counted: bool
                         ) -> Decimal | object | None:
        """The engine's repeat path in one call, for a window with nothing to expire before
        `bound` (expire's earliest_event_time - window_ms) and the event time at or after its
        newest entry (nearly every call): append, then the aggregate of the window ending at
        the new entry (None without an aggregator; of the count when `counted`). MISSED when
        the window is not in that case (empty, an entry to expire, out of order): the caller
        goes the general way (expire, add, aggregate), nothing changed."""
        times, head = self._times, self._head
        if len(times) == head or times[head] < bound or event_time < times[-1]:
            return MISSED
        accelerated = self._index
        if accelerated is not None and not accelerated.append(value, text):
            self._index = None
        times.append(event_time)
        self._values.append(text)
        if aggregator is None:
            return None
        start = bisect_left(times, event_time - window_ms, lo=head)
        if counted:
            return of_count(aggregator, len(times) - start)
        return self._aggregate(aggregator, start, len(times))

    def aggregate(self, aggregator: Aggregator, event_time: int, window_ms: int) -> Decimal | None:
        times, head = self._times, self._head
        start = bisect_left(times, event_time - window_ms, lo=head)
        end = len(times) if not times or event_time >= times[-1] else bisect_right(
            times, event_time, lo=start)
        return self._aggregate(aggregator, start, end)

    def _aggregate(self, aggregator: Aggregator, start: int, end: int) -> Decimal | None:
        """The aggregate of entries [start, end) (positions in the lists, past the head)."""
        head = self._head
        if end - start >= RUNNING_SUMS_FROM:
            of_sums, pick = aggregator.of_sums, aggregator.extreme
            accelerated = self._index
            if of_sums is not None:
                if type(accelerated) is not RunningSums:
                    accelerated = self._index = RunningSums(self._values[head:])
                return of_sums(accelerated.total(start - head, end - head), end - start)
            if pick is not None and end == len(self._times):
                first = start - head
                if (type(accelerated) is not SuffixExtremes or accelerated.pick is not pick
                        or not accelerated.covers(first)):
                    accelerated = self._index = SuffixExtremes(pick, self._values[head:], first)
                return accelerated.of_suffix(first)
        if start == end:
            return None
        return aggregator.of_values(list(map(decimal_of_text, self._values[start:end])))

    def count_in(self, event_time: int, window_ms: int) -> int:
        times = self._times
        start = bisect_left(times, event_time - window_ms, lo=self._head)
        end = len(times) if not times or event_time >= times[-1] else bisect_right(
            times, event_time, lo=start)
        return end - start

    def expire(self, earliest_event_time: int, window_ms: int) -> bool:
        times, head = self._times, self._head
        bound = earliest_event_time - window_ms
        if len(times) == head or times[head] >= bound:
            # the common case (entries live an hour past their window): nothing to cut, known
            # from the oldest entry alone; the search of a long window reads entries all over
            # memory (~8 % of a shard's samples late in a run; BENCHMARKS.md, tenth session)
            return False
        first = bisect_left(times, bound, lo=head)  # past head: times[head] is cut
        cut = first - head
        if first * 8 >= len(times):
            del times[:first]
            del self._values[:first]
            first = 0
        self._head = first
        self._cut += cut
        if self._index is not None:
            self._index.cut(cut)
        return True

    def first_end(self) -> int | None:
        times, head = self._times, self._head
        return times[head] + 1 if len(times) > head else None

    def take_log_delta(self) -> tuple[int, list[int], list[str]] | None:
        """What changed since the change log last took this window: (entries cut from the
        front, entries appended), or None when the log needs the whole window. Marks the
        window as logged: a hot window is then logged by its new entries, not all of them."""
        logged, cut, times, head = self._logged, self._cut, self._times, self._head
        self._logged, self._cut = len(times) - head, 0
        if logged is None:
            return None
        kept = head + (logged - cut if logged > cut else 0)
        return (cut, times[kept:], self._values[kept:])

    def forget_logged(self) -> None:
        """The change log must take the whole window next time (it is put somewhere new)."""
        self._logged, self._cut = None, 0

    def apply_log_delta(self, cut: int, times: list[int], values: list[str]) -> None:
        """Replay a take_log_delta() on the window as the log had it. What this window's own
        log last took no longer describes it, so that log takes it whole next time (an
        append counted against the old bookkeeping could otherwise be left out)."""
        front = self._head + cut
        del self._times[:front]
        del self._values[:front]
        self._head = 0
        self._times.extend(times)
        self._values.extend(values)
        self._index = None
        self.forget_logged()

    def __len__(self) -> int:
        return len(self._times) - self._head

    def state(self) -> ExactWindow:
        return self  # pickles as (times, values): see __reduce__


MISSED = object()  # ExactWindow.append_aggregate: not its case

# entries in the window from which it answers from its index; shorter ones are simply added
# up, or their MIN or MAX taken
RUNNING_SUMS_FROM = 16


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
        return state.entries()
    first, second = state
    return ([first], [second]) if type(first) is int else (first, second)
