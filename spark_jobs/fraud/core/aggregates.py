"""Aggregator functions and limit operators of a rule, in exact decimal arithmetic.

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
from typing import Any

COUNT_FLINK = "COUNT_FLINK"
COUNT_WITH_RESET_FLINK = "COUNT_WITH_RESET_FLINK"
COUNT_FIELDS = frozenset({COUNT_FLINK, COUNT_WITH_RESET_FLINK})

ZERO = Decimal(0)
ONE = Decimal(1)

# Addition with unlimited precision is exact; AVG's division is rounded to decimal128.
EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)
AVG_CONTEXT = Context(prec=34, rounding=ROUND_HALF_EVEN, Emax=MAX_EMAX, Emin=MIN_EMIN)


class Aggregator(StrEnum):
    SUM = "SUM"
    AVG = "AVG"
    MIN = "MIN"
    MAX = "MAX"


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


def compare(op: Operator, aggregate: Decimal, limit: Decimal) -> bool:
    """`aggregate <op> limit`, numerically (2.0 EQUAL 2 holds)."""
    return _COMPARE[op](aggregate, limit)


def exact_sum(values: Sequence[Decimal]) -> Decimal:
    """The sum without any rounding, whatever the magnitudes (the C-level sum() in an
    unlimited context: about ten times faster than adding in a Python loop)."""
    with localcontext(EXACT):
        return sum(values, ZERO)


def average(total: Decimal, count: int) -> Decimal:
    """total / count to 34 significant digits (exact when the quotient fits)."""
    return AVG_CONTEXT.divide(total, Decimal(count))


def aggregate(aggregator: Aggregator, values: Sequence[Decimal]) -> Decimal | None:
    """The aggregate of the window's values; None for an empty window (which never alerts)."""
    if not values:
        return None
    if aggregator is Aggregator.SUM:
        return exact_sum(values)
    if aggregator is Aggregator.AVG:
        return average(exact_sum(values), len(values))
    if aggregator is Aggregator.MIN:
        return min(values)
    return max(values)


def field_value(fields: Mapping[str, Any], field: str) -> Decimal | None:
    """The value a transaction contributes to a rule: 1 for the COUNT_* fields, the field as a
    plain Decimal when it is a JSON number, None (skipped) when missing or non-numeric.

    Only JSON numbers count: a numeric-looking string such as "21.5" is non-numeric, as are
    booleans (which Python would otherwise treat as ints)."""
    if field in COUNT_FIELDS:
        return ONE
    value = fields.get(field)
    if isinstance(value, Decimal):
        return Decimal(value)  # a plain copy: no parse-time text in the state
    if isinstance(value, int) and not isinstance(value, bool):
        return Decimal(value)
    return None
