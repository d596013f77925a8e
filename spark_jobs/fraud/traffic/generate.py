"""Pure generation: transactions in id order, seeded (the same spec gives the same
transactions, field for field), and their message text."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterator
from typing import Any, NamedTuple

import orjson

from spark_jobs.fraud.traffic.spec import DEFAULT_SPEC, REGULARS, TransactionSpec
from spark_jobs.streaming.traffic import DEFAULT_START_MS
from spark_jobs.streaming.traffic.popularity import Popularity, cumulative, pick

EVENT_TIME = "eventTime"


class _Draws:
    """Draws of one spec, from one seeded random source: a payee pays one of its REGULARS
    regular beneficiaries most of the time, so windows keyed by payee, by beneficiary and by
    the pair all see repeats."""

    def __init__(self, spec: TransactionSpec) -> None:
        self.spec = spec
        self.rng = random.Random(spec.seed)
        self._types = [name for name, _ in spec.payment_types]
        self._type_weights = cumulative(w for _, w in spec.payment_types)
        self._mu = math.log(spec.amount_median)
        shuffle = random.Random(spec.seed + 1)
        self._payees = Popularity(range(1, spec.payees + 1), spec.skew, shuffle)
        self._beneficiaries = Popularity(range(1, spec.beneficiaries + 1), spec.skew, shuffle)

    def payee(self) -> int:
        return self._payees.draw(self.rng)

    def beneficiary(self, payee: int) -> int:
        if self.rng.random() < self.spec.regular_share:
            regular = self.rng.randrange(REGULARS)
            index = (payee * 7919 + regular * 104_729) % self.spec.beneficiaries
            return self._beneficiaries.ids[index]
        return self._beneficiaries.draw(self.rng)

    def amount(self) -> float:
        value = self.rng.lognormvariate(self._mu, self.spec.amount_sigma)
        return max(round(value, 2), 0.01)

    def payment_type(self) -> str:
        return self._types[pick(self._type_weights, self.rng)]


def generate_transactions(
    spec: TransactionSpec = DEFAULT_SPEC,
    count: int | None = None,
    start_ms: int = DEFAULT_START_MS,
    rate_per_s: float = 1000.0,
) -> Iterator[dict[str, Any]]:
    """Transactions in id order; eventTime advances at rate_per_s from start_ms (the producer
    replaces it with the wall clock). Endless when count is None."""
    if rate_per_s <= 0:
        raise ValueError(f"rate_per_s must be positive, got {rate_per_s}")
    draws = _Draws(spec)
    numbers = itertools.count() if count is None else range(count)
    for index in numbers:
        payee = draws.payee()
        yield {
            "transactionId": spec.first_id + index,
            "eventTime": start_ms + int(index * 1000 / rate_per_s),
            "payeeId": payee,
            "beneficiaryId": draws.beneficiary(payee),
            "paymentAmount": draws.amount(),
            "paymentType": draws.payment_type(),
        }


def transaction_text(transaction: dict[str, Any]) -> bytes:
    """The message value: compact JSON, amounts as their shortest decimal text (21.5)."""
    return orjson.dumps(transaction)


class Rendered(NamedTuple):
    """A transaction's message made ahead of its sending, but for its eventTime: the value
    is head + the eventTime's digits + tail, byte for byte transaction_text's."""

    key: str
    head: bytes
    tail: bytes

    def value(self, event_time_ms: int) -> bytes:
        return self.head + b"%d" % event_time_ms + self.tail


def rendered(transaction: dict[str, Any]) -> Rendered:
    """`transaction` rendered without its eventTime (transactionId, eventTime, then the rest:
    generate_transactions' field order). Made before paced traffic starts, so that the
    sender's CPU per message is the splice and the send, not the draws and the JSON (a
    sender sharing the machine with the job it feeds takes less from it)."""
    if list(transaction)[:2] != ["transactionId", EVENT_TIME]:
        raise ValueError("a rendered transaction starts with transactionId and eventTime")
    rest = {name: value for name, value in transaction.items()
            if name not in ("transactionId", EVENT_TIME)}
    head = orjson.dumps({"transactionId": transaction["transactionId"]})[:-1] + (
        b',"' + EVENT_TIME.encode() + b'":')
    tail = b"}" if not rest else b"," + orjson.dumps(rest)[1:]
    return Rendered(str(transaction["payeeId"]), head, tail)
