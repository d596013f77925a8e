"""Running sums of a long exact window's values, so that SUM and AVG over it cost a subtraction
instead of re-adding every entry as a Decimal.

Kept only in memory beside a window's entries (never stored), and only for windows long enough
to need them: a separate object, so that the many short windows pay one empty slot for it. The
sums are integers, the values scaled by 10^scale (the most decimal places among the window's
values), 8 bytes each in an array while they fit 64 bits, else in a list of Python ints (a
Decimal each took 104 B). A value finer than the scale, or one inserted before the end, makes
the owner drop them; they are rebuilt when next needed (the JSON gate bounds how fine a value
can be: keys.MAX_ADJUSTED_EXPONENT).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from decimal import Decimal

from spark_jobs.fraud.core.aggregates import EXACT, decimal_of_text

_UNIT = {e: Decimal((0, (1,), e)) for e in range(-12, 4)}
_POWERS = [10 ** k for k in range(40)]  # the usual shifts, computed once


class RunningSums:
    """Over the entries still in the window, values[0..n): prefix[head + i] = base +
    values[0..i], scaled by 10^scale (prefix[head - 1] is base when head > 0); exponents[head
    + i] is values[i]'s; finest[head + i] = finest_base + how many of values[0..i] have the
    finest exponent, -scale. The first `head` positions are entries already cut."""

    __slots__ = ("base", "exponents", "finest", "finest_base", "head", "prefix", "scale")

    def __init__(self, values: Sequence[str]) -> None:
        decimals = list(map(decimal_of_text, values))
        exponents = [exponent_of(value) for value in decimals]
        scale = max(0, -min(exponents, default=0))
        running, sums, fine, fines = 0, [], 0, []
        for value, exponent in zip(decimals, exponents, strict=True):
            running += scaled(value, scale)
            sums.append(running)
            fine += exponent == -scale
            fines.append(fine)
        try:
            self.prefix: array[int] | list[int] = array("q", sums)
        except OverflowError:
            self.prefix = sums
        self.exponents = array("i", exponents)
        # so that total() knows a range's exponent without visiting its entries: a hot
        # key's window holds tens of thousands (BENCHMARKS.md, 2026-11-30)
        self.finest = array("q", fines)
        self.base = self.finest_base = 0
        self.head = 0  # entries cut but still at the front (dropped in one go, as the window's)
        self.scale = scale

    def append(self, value: Decimal, text: str | None = None) -> bool:
        """Extend by a value appended at the end (text: str(value), when the caller has it);
        False when it is finer than the scale (the sums must then be rebuilt)."""
        read = None if text is None else plain_digits(text)
        if read is None:
            exponent = exponent_of(value)
            if -exponent > self.scale:
                return False
            step = scaled(value, self.scale)
        else:  # read off the text: half the cost of asking the Decimal (BENCHMARKS.md)
            exponent, digits = read
            if -exponent > self.scale:
                return False
            power = self.scale + exponent
            step = digits * (_POWERS[power] if power < len(_POWERS) else 10 ** power)
        prefix = self.prefix
        total = (prefix[-1] if prefix else self.base) + step
        try:
            prefix.append(total)
        except OverflowError:  # beyond 64 bits: Python integers from now on
            self.prefix = prefix = prefix.tolist()
            prefix.append(total)
        self.exponents.append(exponent)
        finest = self.finest
        finest.append((finest[-1] if finest else self.finest_base) + (exponent == -self.scale))
        return True

    def cut(self, count: int) -> None:
        """Forget the first `count` entries (expired from the window)."""
        head = self.head + count
        self.base = self.prefix[head - 1]
        self.finest_base = self.finest[head - 1]
        if head * 8 >= len(self.prefix):
            del self.prefix[:head]
            del self.exponents[:head]
            del self.finest[:head]
            head = 0
        self.head = head

    def total(self, start: int, end: int) -> Decimal:
        """The exact sum of entries [start, end), with the exponent the plain sum would have
        (the smallest of 0 and the entries'), so 2.50 + 1.5 still reads 4.00."""
        start += self.head  # positions in the arrays (prefix[head - 1] is base)
        end += self.head
        prefix = self.prefix
        before = prefix[start - 1] if start else self.base
        if not self.scale:  # no entry has a fraction
            exponent = 0
        elif self.finest[end - 1] > (self.finest[start - 1] if start else self.finest_base):
            exponent = -self.scale  # one of the range has the finest: nearly every range
        else:  # rare: the range's own, as sum() starting from 0 gives it
            exponent = min(0, min(self.exponents[start:end]))
        return Decimal(prefix[end - 1] - before).scaleb(-self.scale, context=EXACT).quantize(
            _UNIT[exponent] if exponent in _UNIT else Decimal((0, (1,), exponent)),
            context=EXACT)


def plain_digits(text: str) -> tuple[int, int] | None:
    """(exponent, the digits as an integer) of a decimal's text without an exponent part
    ("-13.08": (-2, -1308), "7": (0, 7)); None for any other text ("1E+2")."""
    if "E" in text:
        return None
    dot = text.find(".")
    try:
        if dot < 0:
            return 0, int(text)
        return dot + 1 - len(text), int(text[:dot] + text[dot + 1:])
    except ValueError:  # not a plain decimal: the Decimal tells
        return None


def scaled(value: Decimal, scale: int) -> int:
    """value * 10^scale, exact (value has at most `scale` decimal places)."""
    return int(value.scaleb(scale, context=EXACT))


def exponent_of(value: Decimal) -> int:
    exponent = value.as_tuple().exponent
    if not isinstance(exponent, int):
        raise ValueError(f"not a finite amount: {value}")
    return exponent
