"""Aggregator functions and limit operators of a rule, in exact decimal arithmetic.

Each aggregator function is one entry of `Aggregator`, declaring every way a window can
answer it; windows ask the entry and rule parsing accepts exactly its names, so adding a
function is one entry here (and its test).

Money must not be summed in binary floating point, so every value is a `Decimal` and sums are
computed in a context wide enough never to round. AVG is the one operation that cannot always
be exact (1/3); it divides the exact sum by the count with 34 significant digits (IEEE
decimal128, the precision of Java's `MathContext.DECIMAL128`), rounding half-even, which is
exact whenever the quotient has at most 34 digits.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from decimal import (
    MAX_EMAX,
    MAX_PREC,
    MIN_EMIN,
    ROUND_HALF_EVEN,
    Context,
    Decimal,
    localcontext,
)
from enum import StrEnum
from typing import Any, Protocol

COUNT_FLINK = "COUNT_FLINK"
COUNT_WITH_RESET_FLINK = "COUNT_WITH_RESET_FLINK"
COUNT_FIELDS = frozenset({COUNT_FLINK, COUNT_WITH_RESET_FLINK})

ZERO = Decimal(0)
ONE = Decimal(1)
# Counts as Decimals, made once: every COUNT_* rule and AVG turns a count into one per
# transaction, and making a Decimal parses its arguments by keyword (BENCHMARKS.md)
_COUNTS = tuple(Decimal(count) for count in range(4096))


def count_decimal(count: int) -> Decimal:
    """Decimal(count) of a count (>= 0)."""
    return _COUNTS[count] if 0 <= count < len(_COUNTS) else Decimal(count)


class DecimalsOfText(dict[str, Decimal]):
    """Decimal(text) of the value texts windows hold, each made once while it is in use:
    a short window's aggregate reads its entries back as Decimals at every transaction of its
    key, and the amounts repeat (cents of a few hundred units). Decimals are immutable, so
    sharing one is exact. It stays bounded (~15 MB) whatever the traffic: a text longer than
    `longest` (a hostile amount can be thousands of digits) is made each time, not kept, and
    at `limit` entries the table starts again."""

    def __init__(self, limit: int = 1 << 16, longest: int = 40) -> None:
        super().__init__()
        self.limit, self.longest = limit, longest

    def __missing__(self, text: str) -> Decimal:
        if len(text) > self.longest:
            return Decimal(text)
        if len(self) >= self.limit:
            self.clear()
        value = self[text] = Decimal(text)
        return value


decimal_of_text = DecimalsOfText().__getitem__

# Addition with unlimited precision is exact; AVG's division is rounded to decimal128.
EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)
AVG_CONTEXT = Context(prec=34, rounding=ROUND_HALF_EVEN, Emax=MAX_EMAX, Emin=MIN_EMIN)


class Operator(StrEnum):
    EQUAL = "EQUAL"
    NOT_EQUAL = "NOT_EQUAL"
    GREATER = "GREATER"
    LESS = "LESS"
    GREATER_EQUAL = "GREATER_EQUAL"
    LESS_EQUAL = "LESS_EQUAL"


OPERATOR_SYMBOLS: Mapping[str, Operator] = {
    "=": Operator.EQUAL,
    "!=": Operator.NOT_EQUAL,
    ">": Operator.GREATER,
    "<": Operator.LESS,
    ">=": Operator.GREATER_EQUAL,
    "<=": Operator.LESS_EQUAL,
}

_COMPARE: Mapping[Operator, Callable[[Decimal, Decimal], bool]] = {
    Operator.EQUAL: operator.eq,
    Operator.NOT_EQUAL: operator.ne,
    Operator.GREATER: operator.gt,
    Operator.LESS: operator.lt,
    Operator.GREATER_EQUAL: operator.ge,
    Operator.LESS_EQUAL: operator.le,
}


def comparator(op: Operator) -> Callable[[Decimal, Decimal], bool]:
    """The function computing `aggregate <op> limit` (compare, looked up once)."""
    return _COMPARE[op]


def compare(op: Operator, aggregate: Decimal, limit: Decimal) -> bool:
    """`aggregate <op> limit`, numerically (2.0 EQUAL 2 holds)."""
    return _COMPARE[op](aggregate, limit)


def exact_sum(values: Sequence[Decimal]) -> Decimal:
    """The sum without any rounding, whatever the magnitudes (the C-level sum() in an
    unlimited context: about ten times faster than adding in a Python loop). A few values
    (most windows) are added one by one in that context, the same additions in the same
    order, without the cost of switching contexts."""
    if len(values) <= _FEW:
        total, add = ZERO, EXACT.add
        for value in values:
            total = add(total, value)
        return total
    with localcontext(EXACT):
        return sum(values, ZERO)


_FEW = 6


def average(total: Decimal, count: int) -> Decimal:
    """total / count to 34 significant digits (exact when the quotient fits)."""
    return AVG_CONTEXT.divide(total, count_decimal(count))


class Summary(Protocol):
    """The values in a bucketed window's buckets, as far as the exact sum, count, minimum and
    maximum each bucket keeps tell them."""

    def total(self) -> Decimal: ...

    def count(self) -> int: ...

    def minimum(self) -> Decimal: ...

    def maximum(self) -> Decimal: ...


def _total(total: Decimal, count: int) -> Decimal:
    return total


def _mean(values: Sequence[Decimal]) -> Decimal:
    return average(exact_sum(values), len(values))


def _of_total_and_count(of_sums: Callable[[Decimal, int], Decimal]) -> Callable[[Summary], Decimal]:
    def of_buckets(buckets: Summary) -> Decimal:
        return of_sums(buckets.total(), buckets.count())

    return of_buckets


class Aggregator(StrEnum):
    """The aggregator functions of a rule (`aggregatorFunctionType`), one entry each.

    After its name, an entry says how the aggregate follows
    1. from the window's exact values (a non-empty list, oldest first): `of_values`;
    2. from their exact total and count, or None when these do not determine it: `of_sums`.
       An exact window with many entries then answers from running sums instead of adding
       its entries up;
    3. from the `Summary` of a bucketed window's buckets (`fraud.bucket` > 0): `of_buckets`,
       which defaults to `of_sums` of the buckets' total and count.
    A function that the buckets' (sum, count, min, max) do not determine (FIRST, a distinct
    count) needs another bucket column: a change of the stored state, not one more entry.
    `extreme` is of_values when that is min or max (a long window then answers from its
    candidates, suffix_extremes.py), else None.
    """

    of_values: Callable[[Sequence[Decimal]], Decimal]
    of_sums: Callable[[Decimal, int], Decimal] | None
    of_buckets: Callable[[Summary], Decimal]
    extreme: Callable[[Sequence[Any]], Any] | None

    #     name   of_values  of_sums  of_buckets
    SUM = "SUM", exact_sum, _total
    AVG = "AVG", _mean,     average
    MIN = "MIN", min,       None,    lambda buckets: buckets.minimum()
    MAX = "MAX", max,       None,    lambda buckets: buckets.maximum()

    def __new__(
        cls,
        name: str,
        of_values: Callable[[Sequence[Decimal]], Decimal],
        of_sums: Callable[[Decimal, int], Decimal] | None = None,
        of_buckets: Callable[[Summary], Decimal] | None = None,
    ) -> Aggregator:
        member = str.__new__(cls, name)
        member._value_ = name
        member.of_values = of_values
        member.of_sums = of_sums
        if of_buckets is None:
            if of_sums is None:
                raise TypeError(f"aggregator {name} must say how it follows from the buckets")
            of_buckets = _of_total_and_count(of_sums)
        member.of_buckets = of_buckets
        member.extreme = of_values if of_values in (min, max) else None
        return member


def of_count(aggregator: Aggregator, count: int) -> Decimal:
    """The aggregate of `count` (> 0) values that are all 1 (a COUNT_* field's window), as
    of_values would compute it, without building the values."""
    if aggregator.of_sums is None:  # MIN, MAX of ones
        return ONE
    return aggregator.of_sums(count_decimal(count), count)


def aggregate(aggregator: Aggregator, values: Sequence[Decimal]) -> Decimal | None:
    """The aggregate of the window's values; None for an empty window (which never alerts)."""
    return aggregator.of_values(values) if values else None


def field_value(fields: Mapping[str, Any], field: str) -> Decimal | None:
    """The value a transaction contributes to a rule: 1 for the COUNT_* fields, the field as a
    plain Decimal when it is a JSON number, None (skipped) when missing or non-numeric.

    Only JSON numbers count: a numeric-looking string such as "21.5" is non-numeric, as are
    booleans (which Python would otherwise treat as ints)."""
    if field in COUNT_FIELDS:
        return ONE
    value = fields.get(field)
    if isinstance(value, Decimal):
        # a plain copy (no parse-time text in the state), from the text it was read from
        text = getattr(value, "text", None)
        return Decimal(value) if text is None else decimal_of_text(text)
    if isinstance(value, int) and not isinstance(value, bool):
        return Decimal(value)
    return None
