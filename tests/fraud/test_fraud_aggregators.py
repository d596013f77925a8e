"""Every `Aggregator` entry, whatever its name, is answered alike by every window: from the
exact values, from running sums over a long exact window, and from bucket summaries. A new
entry is checked here without a line of test; its own expected values go with the others in
test_fraud_rules.py."""

from __future__ import annotations

import json
import pickle
import random
from decimal import Decimal

import pytest

from spark_jobs.fraud.core.aggregates import (
    Aggregator,
    DecimalsOfText,
    aggregate,
    count_decimal,
    of_count,
)
from spark_jobs.fraud.core.bucket_window import BucketWindow
from spark_jobs.fraud.core.rules import RuleError, parse_rule
from spark_jobs.fraud.core.running_sums import plain_digits
from spark_jobs.fraud.core.windows import MISSED, RUNNING_SUMS_FROM, ExactWindow

TEXTS = ["30", "21.5", "0.125", "1E+2", "7.10", "-3.25", "1000000000000.01", "0", "3", "3.0"]


def entries(seed: int, count: int = 400) -> list[tuple[int, Decimal]]:
    """(eventTime, value) in arrival order: mostly increasing, some out of order, ties."""
    rng = random.Random(seed)
    now, out = 0, []
    for _ in range(count):
        now += rng.randint(0, 12)
        at = now - (rng.randint(0, 60) if rng.random() < 0.2 else 0)
        out.append((at, Decimal(rng.choice(TEXTS))))
    return out


def inside(seen: list[tuple[int, Decimal]], low: int, high: int) -> list[Decimal]:
    """The values with low <= eventTime <= high, oldest first (ties in arrival order)."""
    return [v for t, v in sorted(seen, key=lambda e: e[0]) if low <= t <= high]


def same(got: Decimal | None, expected: Decimal | None) -> bool:
    return (str(got), got) == (str(expected), expected)


@pytest.mark.parametrize("aggregator", list(Aggregator))
@pytest.mark.parametrize("seed", range(3))
def test_exact_windows_short_and_long_equal_the_aggregate_of_their_values(aggregator, seed):
    window, seen, long_windows = ExactWindow(), [], 0
    for step, (at, value) in enumerate(entries(seed)):
        window.add(at, value)
        seen.append((at, value))
        end, span = at + step % 7, (10, 100, 1_000)[step % 3]
        values = inside(seen, end - span, end)
        long_windows += len(values) >= RUNNING_SUMS_FROM
        assert same(window.aggregate(aggregator, end, span), aggregate(aggregator, values)), step
    assert long_windows > 100


@pytest.mark.parametrize("aggregator", list(Aggregator))
@pytest.mark.parametrize("bucket_ms", [1, 10, 60])
def test_bucket_summaries_equal_the_aggregate_of_their_buckets_values(aggregator, bucket_ms):
    window, seen = BucketWindow(bucket_ms), []
    for step, (at, value) in enumerate(entries(bucket_ms)):
        window.add(at, value)
        floored = at - at % bucket_ms
        seen.append((floored, value))
        end, span = at + step % 7, (10, 100, 1_000)[step % 3]
        values = inside(seen, window.floor(end - span), window.floor(end))
        assert same(window.aggregate(aggregator, end, span), aggregate(aggregator, values)), step


@pytest.mark.parametrize("aggregator", list(Aggregator))
def test_empty_windows_have_no_aggregate(aggregator):
    assert ExactWindow().aggregate(aggregator, 0, 10) is None
    assert BucketWindow(10).aggregate(aggregator, 0, 10) is None


def test_rules_accept_exactly_the_entries():
    def parsed(name: str) -> Aggregator:
        return parse_rule(json.dumps({
            "ruleId": 1, "ruleState": "ACTIVE", "groupingKeyNames": [],
            "aggregateFieldName": "x", "aggregatorFunctionType": name,
            "limitOperatorType": ">", "limit": 1, "windowMinutes": 1,
        })).aggregator

    assert [parsed(a.value) for a in Aggregator] == list(Aggregator)
    names = ", ".join(a.value for a in Aggregator)
    with pytest.raises(RuleError, match=f"expected one of {names}\\)$"):
        parsed("MEDIAN")


@pytest.mark.parametrize("texts", [
    ["1.5", "9223372036854775807", "9E+30"],  # sums outgrowing 64 bits: Python integers
    ["2", "1E-60", "0.5"],  # sixty places: the scaled sums are Python integers
    ["1", "2", "0.001", "3.25"],  # a finer value after the sums were built: rebuilt
    ["-1.5", "0.1234567890123456789012345678901234567890123", "-0.00", "7"],  # 43 places
])
@pytest.mark.parametrize("aggregator", [Aggregator.SUM, Aggregator.AVG])
@pytest.mark.parametrize("with_text", [False, True])
def test_running_sums_stay_exact_at_any_magnitude_and_precision(texts, aggregator, with_text):
    """Long windows answer from running sums of scaled integers: every value's exact
    contribution, whatever its size or decimal places, also across expiry cuts; read from
    the value or from its text, as the engine hands it."""
    window, seen = ExactWindow(), []
    for at in range(3 * RUNNING_SUMS_FROM):
        value = Decimal(texts[0] if at < RUNNING_SUMS_FROM else texts[at % len(texts)])
        window.add(at, value, str(value) if with_text else None)
        seen.append((at, value))
        if at % 5 == 4:
            window.expire(at - 2 * RUNNING_SUMS_FROM, 0)
        low = max(0, at - 2 * RUNNING_SUMS_FROM)
        assert same(window.aggregate(aggregator, at, at - low),
                    aggregate(aggregator, inside(seen, low, at))), at


@pytest.mark.parametrize("aggregator", [Aggregator.SUM, Aggregator.AVG])
def test_running_sums_read_a_range_without_the_finest_value_in_its_own_places(aggregator):
    """The sums are scaled to the window's finest value (0.125: three places), but a range
    that no longer holds it reads in its own entries' places (7.10 + 7.10 = 14.20), before
    and after that entry is cut from the front; a range holding it reads in three."""
    window, seen = ExactWindow(), []
    for at, text in enumerate(["0.125", *["7.10"] * (3 * RUNNING_SUMS_FROM)]):
        window.add(at, Decimal(text))
        seen.append((at, Decimal(text)))
    newest = len(seen) - 1
    for low in (0, 1, RUNNING_SUMS_FROM):
        got = window.aggregate(aggregator, newest, newest - low)
        assert same(got, aggregate(aggregator, inside(seen, low, newest))), low
    assert str(window.aggregate(Aggregator.SUM, newest, newest)) == "340.925"
    assert str(window.aggregate(Aggregator.SUM, newest, newest - 1)) == "340.80"
    window.expire(1, 0)  # 0.125 cut: the sums keep their scale until rebuilt
    assert str(window.aggregate(Aggregator.SUM, newest, newest - 1)) == "340.80"
    assert same(window.aggregate(aggregator, newest, newest - 1),
                aggregate(aggregator, inside(seen, 1, newest)))


@pytest.mark.parametrize("aggregator", list(Aggregator))
def test_a_long_window_cut_by_one_entry_at_a_time_answers_like_its_entries(aggregator):
    """A hot key's window loses its oldest entry at each transaction of the key, and the
    expired front is dropped only once it is an eighth of the window: until then every
    answer, the length, the first end and the change log's deltas skip it. (Reading
    `times`, comparing or pickling drops it, so they are checked only now and then.)"""
    rng, span = random.Random(5), 4 * RUNNING_SUMS_FROM
    window, seen, logged = ExactWindow(), [], None
    for at in range(30 * RUNNING_SUMS_FROM):
        value = Decimal(rng.choice(TEXTS))
        window.add(at, value)
        seen.append((at, value))
        window.expire(at - span, 0)
        assert window._head * 8 < len(window._times)  # the expired front: under an eighth
        low = max(0, at - span)
        assert (len(window), window.first_end()) == (len(inside(seen, low, at)), low + 1)
        for width in (span, span // 2, 3):
            expected = aggregate(aggregator, inside(seen, at - width, at))
            assert same(window.aggregate(aggregator, at, width), expected), (at, width)
        assert window.count_in(at - 1, span) == len(inside(seen, low, at - 1))  # all kept
        delta = window.take_log_delta()
        if delta is None:  # the first take: the log gets the whole window
            logged = ExactWindow(list(window.times), list(window.values))
        else:
            logged.apply_log_delta(*delta)
        if at % 50 == 49:
            assert logged == window
            assert window.times == [t for t, _ in seen[low:]]
            assert pickle.loads(pickle.dumps(window)) == window
    assert logged == window


@pytest.mark.parametrize("seed", range(8))
def test_an_exact_window_answers_like_the_sorted_list_of_its_entries(seed):
    """Random appends (some late, landing behind an expired front still held), expiries,
    aggregates and counts over any range, change-log deltas replayed on a copy and pickles,
    against a plain sorted list: the window's index (running sums, candidates) is built,
    cut and rebuilt with and without an expired front in both."""
    rng = random.Random(seed)
    texts = [*TEXTS, "9223372036854775.807", "0.0000001"] if seed % 2 else TEXTS
    window, model, replica, now = ExactWindow(), [], None, 0
    for step in range(1500):
        draw = rng.random()
        if draw < 0.45:
            now += rng.randint(0, 3)
            at = now - (rng.randint(0, 80) if rng.random() < 0.1 else 0)
            text = rng.choice(texts)
            window.add(at, Decimal(text), text)
            model.insert(sum(1 for t, _ in model if t <= at), (at, text))
        elif draw < 0.6:
            span, earliest = rng.choice([40, 60, 100]), now - rng.randint(0, 10)
            kept = [e for e in model if e[0] >= earliest - span]
            assert window.expire(earliest, span) == (len(kept) < len(model)), step
            model = kept
        elif draw < 0.85:
            aggregator, span = rng.choice(list(Aggregator)), rng.choice([5, 40, 60, 100, 200])
            end = now - (rng.randint(0, 30) if rng.random() < 0.3 else 0) + rng.randint(0, 2)
            values = [Decimal(x) for t, x in model if end - span <= t <= end]
            assert same(window.aggregate(aggregator, end, span),
                        aggregate(aggregator, values)), (step, aggregator)
            assert window.count_in(end, span) == len(values)
        elif draw < 0.93:
            delta = window.take_log_delta()
            if delta is None:
                replica = ExactWindow(*(list(column) for column in zip(*model, strict=True))
                                      ) if model else ExactWindow()
            else:
                replica.apply_log_delta(*delta)
            if rng.random() < 0.3:
                assert replica == window, step
        elif draw < 0.96:
            assert pickle.loads(pickle.dumps(window)) == window
        first = model[0][0] + 1 if model else None
        assert (len(window), window.first_end()) == (len(model), first), step
    assert (window.times, window.values) == ([t for t, _ in model], [x for _, x in model])


def test_a_change_log_delta_replays_on_a_window_whose_expired_front_is_still_held():
    """A delta's cut counts from the first entry the window still has, whatever expired
    entries it holds at the front meanwhile."""
    window = ExactWindow(list(range(40)), [str(at) for at in range(40)])
    window.expire(3, 0)  # 3 of 40 expired: still held (fewer than an eighth)
    window.apply_log_delta(2, [40, 41], ["40", "41"])
    assert (window.times, window.values) == (list(range(5, 42)), [str(at) for at in range(5, 42)])


@pytest.mark.parametrize("append", ["add", "append_aggregate"])
def test_a_window_brought_forward_by_a_delta_is_logged_whole_next(append):
    """After apply_log_delta the window's own log bookkeeping no longer describes it: its
    next delta would count an append against entries the replay cut, and leave it out."""
    window = ExactWindow([1, 2, 3, 4], ["1", "2", "3", "4"])
    window.take_log_delta()  # the log holds its 4 entries
    window.apply_log_delta(2, [], [])
    if append == "add":
        window.add(5, Decimal(5), "5")
    else:
        assert window.append_aggregate(5, Decimal(5), "5", 0, 10, None, False) is None
    assert window.take_log_delta() is None  # the whole window: [3, 4, 5]
    assert window.times == [3, 4, 5]


TIED = ["3", "3.0", "3.00", "1", "1.0", "2.5", "-0", "0"]  # extremes in several texts


@pytest.mark.parametrize("aggregator", [Aggregator.MIN, Aggregator.MAX])
@pytest.mark.parametrize("seed", range(6))
def test_min_and_max_of_long_windows_follow_the_newest_entries_across_cuts(aggregator, seed):
    """A long window ending at its newest entry answers MIN and MAX from the candidates for
    its extreme: the same value and text as over all the values (3 and 3.0: the first),
    across expiry cuts, equal timestamps, and an entry inserted before the end (rebuilt)."""
    rng = random.Random(seed)
    window, seen, answered = ExactWindow(), [], 0
    for at in range(0, 6 * RUNNING_SUMS_FROM):
        late = rng.random() < 0.03
        event_time = at - rng.randint(1, 5) if late else at - at % 2  # pairs of equal times
        value = Decimal(rng.choice(TIED))
        window.add(event_time, value)
        seen.append((event_time, value))
        newest = max(t for t, _v in seen)
        if at % 7 == 6:  # forget what no window asked below can hold
            window.expire(newest - 3 * RUNNING_SUMS_FROM, 0)
        span = rng.choice((RUNNING_SUMS_FROM, 2 * RUNNING_SUMS_FROM, 3 * RUNNING_SUMS_FROM))
        expected = aggregate(aggregator, inside(seen, newest - span, newest))
        assert same(window.aggregate(aggregator, newest, span), expected), at
        answered += type(window._index).__name__ == "SuffixExtremes"
    assert answered > 3 * RUNNING_SUMS_FROM  # the candidates really answered


@pytest.mark.parametrize("aggregator", [*list(Aggregator), None])
@pytest.mark.parametrize("counted", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_the_repeat_path_in_one_call_equals_expire_add_aggregate(aggregator, counted, seed):
    """append_aggregate answers and changes the window exactly as expire, add and aggregate
    (or count) do, or returns MISSED and changes nothing: the engine then goes that way."""
    rng = random.Random(seed)
    fused, general = ExactWindow(), ExactWindow()
    taken, missed, behind_head = 0, 0, 0
    for step, (at, value) in enumerate(entries(seed, 600)):
        text = str(value)
        if counted:
            value, text = Decimal(1), "1"
        # mostly a long window, cut a little at a time (its expired front then stays until
        # it is an eighth of the lists), and a narrow one now and then (a deep cut)
        window_ms = 500 if step % 200 != 199 else rng.choice((10, 100))
        earliest = at - rng.choice((0, 5, 50, 5_000))
        before = held(fused)
        behind_head += fused._head > 0  # expired entries still at the front
        got = fused.append_aggregate(at, value, text, earliest - window_ms, window_ms,
                                     aggregator, counted)
        if got is MISSED:
            missed += 1
            assert held(fused) == before
            fused.expire(earliest, window_ms)
            fused.add(at, value, text)
        else:
            taken += 1
        general.expire(earliest, window_ms)
        general.add(at, value, text)
        if aggregator is None:
            expected = None
        elif counted:
            expected = of_count(aggregator, general.count_in(at, window_ms))
        else:
            expected = general.aggregate(aggregator, at, window_ms)
        if got is not MISSED:
            assert same(got, expected), (at, got, expected)
        assert held(fused) == held(general)  # without compacting either front
        assert same(fused.aggregate(Aggregator.SUM, at, window_ms),
                    general.aggregate(Aggregator.SUM, at, window_ms))
        if step % 7 == 0:  # what a change log takes of each is the same
            assert fused.take_log_delta() == general.take_log_delta()
    assert taken > 300 and missed > 50 and behind_head > 100, (taken, missed, behind_head)


def held(window: ExactWindow) -> tuple[list[int], list[str]]:
    """The entries a window holds, read without dropping its expired front (`entries()`
    would, and the repeat path would then never meet a window with one)."""
    return window._times[window._head:], window._values[window._head:]


@pytest.mark.parametrize("text", [*TEXTS, "-0.00", "-13.08", "0.000001", "1E-7", "-7",
                                  "12345678901234567890.5", "1.000E+5"])
def test_a_plain_decimal_text_reads_as_its_decimal(text):
    value = Decimal(text)
    read = plain_digits(str(value))
    if "E" in str(value):
        assert read is None
    else:
        exponent, digits = read
        assert exponent == value.as_tuple().exponent
        assert Decimal(digits).scaleb(exponent) == value


@pytest.mark.parametrize("count", [0, 1, 7, 4095, 4096, 10**12])
def test_a_count_as_a_decimal_is_the_decimal_of_the_count(count):
    assert count_decimal(count).as_tuple() == Decimal(count).as_tuple()


def test_decimals_of_texts_are_made_once_each_and_the_table_stays_bounded():
    """What a short window reads back: Decimal(text) itself (same digits and exponent, so
    sums keep their places), one shared object per text while it is kept, never more than
    `limit` kept."""
    table = DecimalsOfText(limit=3, longest=12)
    texts = ["21.50", "21.5", "1E+2", "-0.00", "7", "21.50"]
    for text in texts:
        assert table[text].as_tuple() == Decimal(text).as_tuple()
        assert table[text] is table[text]
        assert len(table) <= 3
    long_text = "0." + "1" * 5000  # hostile: made, never kept
    assert table[long_text] == Decimal(long_text)
    assert long_text not in table
    assert aggregate(Aggregator.SUM, [table["2.50"], table["1.5"]]).as_tuple() == (
        Decimal("4.00").as_tuple())
