"""Synthetic card-payment traffic for the fraud_rules job: transactions and benchmark rules.

`generate_transactions` is pure and seeded: the same spec gives the same transactions, field
for field. Payees and beneficiaries are drawn from Zipf-like popularity curves (a few very
busy accounts, a long tail), and a payee pays one of a few regular beneficiaries most of the
time, so that windows keyed by payee, by beneficiary and by the pair all see repeats.
Amounts are log-normal with two decimals (median `amount_median`).

`produce_transactions` sends such transactions to the `transactions` topic at a steady rate
with event time = wall clock at sending, and the same instant as the Kafka message timestamp,
so a consumer can measure latency from a transaction's arrival in Kafka with its eventTime.

`benchmark_rules` are ten rules of the public Flink demo's form over these fields (CONTRACTS.md
section 7), sized so that together they fire for a few per cent of transactions.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import threading
import time
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from spark_jobs.contracts.topics import TOPIC_TRANSACTIONS
from spark_jobs.settings import Settings

DEFAULT_START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
REGULARS = 3  # regular beneficiaries per payee
FLUSH_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class TransactionSpec:
    """What the generated traffic looks like.

    skew is the Zipf exponent of account popularity (0 = uniform; the default 0.5 gives the
    busiest of 50,000 payees ~0.2 % of all payments, 1 would give it ~9 %). regular_share is
    the chance that a payment goes to one of the payee's REGULARS regular beneficiaries
    instead of a random one.
    """

    payees: int = 50_000
    beneficiaries: int = 20_000
    skew: float = 0.5
    regular_share: float = 0.6
    amount_median: float = 30.0
    amount_sigma: float = 1.2
    payment_types: tuple[tuple[str, float], ...] = (("CRD", 0.7), ("CSH", 0.3))
    seed: int = 7
    first_id: int = 1

    def __post_init__(self) -> None:
        if self.payees <= 0 or self.beneficiaries <= 0:
            raise ValueError("payees and beneficiaries must be positive")
        if self.skew < 0 or not 0 <= self.regular_share <= 1:
            raise ValueError("skew must be >= 0 and regular_share in [0, 1]")
        if self.amount_median <= 0 or self.amount_sigma < 0:
            raise ValueError("amount_median must be positive and amount_sigma >= 0")
        if not self.payment_types or any(w <= 0 for _, w in self.payment_types):
            raise ValueError("payment_types needs at least one (name, positive weight)")


def _cumulative(weights: list[float]) -> list[float]:
    return list(itertools.accumulate(weights))


@dataclass
class _Sampler:
    """Draws of one spec, from one seeded random source."""

    spec: TransactionSpec
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        spec = self.spec
        self.rng = random.Random(spec.seed)
        self._payees = _cumulative([1 / (k + 1) ** spec.skew for k in range(spec.payees)])
        self._beneficiaries = _cumulative(
            [1 / (k + 1) ** spec.skew for k in range(spec.beneficiaries)]
        )
        self._types = [name for name, _ in spec.payment_types]
        self._type_weights = _cumulative([w for _, w in spec.payment_types])
        self._mu = math.log(spec.amount_median)
        # popularity rank -> id, shuffled so ids carry no hint of how busy an account is
        shuffle = random.Random(spec.seed + 1)
        self._payee_ids = list(range(1, spec.payees + 1))
        self._beneficiary_ids = list(range(1, spec.beneficiaries + 1))
        shuffle.shuffle(self._payee_ids)
        shuffle.shuffle(self._beneficiary_ids)

    def _pick(self, cumulative: list[float]) -> int:
        return bisect_right(cumulative, self.rng.random() * cumulative[-1])

    def payee(self) -> int:
        return self._payee_ids[self._pick(self._payees)]

    def beneficiary(self, payee: int) -> int:
        if self.rng.random() < self.spec.regular_share:
            regular = self.rng.randrange(REGULARS)
            index = (payee * 7919 + regular * 104_729) % self.spec.beneficiaries
            return self._beneficiary_ids[index]
        return self._beneficiary_ids[self._pick(self._beneficiaries)]

    def amount(self) -> float:
        value = self.rng.lognormvariate(self._mu, self.spec.amount_sigma)
        return max(round(value, 2), 0.01)

    def payment_type(self) -> str:
        return self._types[self._pick(self._type_weights)]


def generate_transactions(
    spec: TransactionSpec = TransactionSpec(),
    count: int | None = None,
    start_ms: int = DEFAULT_START_MS,
    rate_per_s: float = 1000.0,
) -> Iterator[dict[str, Any]]:
    """Transactions in id order; eventTime advances at rate_per_s from start_ms (the producer
    replaces it with the wall clock). Endless when count is None."""
    if rate_per_s <= 0:
        raise ValueError(f"rate_per_s must be positive, got {rate_per_s}")
    sampler = _Sampler(spec)
    numbers = itertools.count() if count is None else range(count)
    for index in numbers:
        payee = sampler.payee()
        yield {
            "transactionId": spec.first_id + index,
            "eventTime": start_ms + int(index * 1000 / rate_per_s),
            "payeeId": payee,
            "beneficiaryId": sampler.beneficiary(payee),
            "paymentAmount": sampler.amount(),
            "paymentType": sampler.payment_type(),
        }


def transaction_text(transaction: dict[str, Any]) -> bytes:
    """The message value: compact JSON, amounts as their shortest decimal text (21.5)."""
    return orjson.dumps(transaction)


# ------------------------------------------------------------------------------ producing


@dataclass
class ProductionReport:
    sent: int = 0
    elapsed_s: float = 0.0
    first_ms: int | None = None
    last_ms: int | None = None
    max_behind_ms: float = 0.0  # how far the producer fell behind its schedule at worst
    first_id: int = 0

    @property
    def rate(self) -> float:
        return self.sent / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"sent": self.sent, "elapsed_s": round(self.elapsed_s, 2),
                "rate": round(self.rate, 1), "first_ms": self.first_ms, "last_ms": self.last_ms,
                "max_behind_ms": round(self.max_behind_ms, 1), "first_id": self.first_id}


def produce_transactions(
    settings: Settings,
    rate_per_s: float,
    seconds: float,
    spec: TransactionSpec = TransactionSpec(),
    stop_event: threading.Event | None = None,
    producer: Any = None,
    topic: str = TOPIC_TRANSACTIONS,
) -> ProductionReport:
    """Send rate_per_s transactions per second for `seconds` (or until stop_event is set),
    paced evenly: transaction i leaves at t0 + i / rate. eventTime and the Kafka timestamp
    are both the wall clock (ms) when it is handed to the producer; the key is the payeeId.
    Raises RuntimeError when a delivery fails."""
    from spark_jobs.streaming.kafka.producer import make_producer

    if rate_per_s <= 0 or seconds <= 0:
        raise ValueError("rate_per_s and seconds must be positive")
    kafka = producer if producer is not None else make_producer(settings.kafka)
    failures: list[Any] = []

    def on_delivery(error: Any, _message: Any) -> None:
        if error is not None:
            failures.append(error)

    report = ProductionReport(first_id=spec.first_id)
    total = math.ceil(rate_per_s * seconds)
    produce, clock = kafka.produce, time.monotonic
    started = clock()
    for index, record in enumerate(generate_transactions(spec, total, rate_per_s=rate_per_s)):
        if failures or (stop_event is not None and stop_event.is_set()):
            break
        due = started + index / rate_per_s
        ahead = due - clock()
        if ahead >= 0.002:
            time.sleep(ahead)
        elif -ahead * 1000 > report.max_behind_ms:
            report.max_behind_ms = -ahead * 1000
        now_ms = int(time.time() * 1000)
        record["eventTime"] = now_ms
        while True:
            try:
                produce(topic, transaction_text(record), str(record["payeeId"]),
                        timestamp=now_ms, on_delivery=on_delivery)
                break
            except BufferError:
                kafka.poll(0.01)
        kafka.poll(0)
        if report.first_ms is None:
            report.first_ms = now_ms
        report.last_ms = now_ms
        report.sent += 1
    undelivered = kafka.flush(FLUSH_TIMEOUT_S)
    report.elapsed_s = clock() - started
    if failures or undelivered:
        raise RuntimeError(f"{len(failures)} transaction(s) failed, {undelivered} undelivered; "
                           f"first: {failures[0] if failures else None}")
    return report


# ------------------------------------------------------------------------------ rules


def _rule(rule_id: int, keys: list[str], field_name: str, function: str, operator: str,
          limit: float | int, minutes: int) -> dict[str, Any]:
    return {"ruleId": rule_id, "ruleState": "ACTIVE", "groupingKeyNames": keys,
            "aggregateFieldName": field_name, "aggregatorFunctionType": function,
            "limitOperatorType": operator, "limit": limit, "windowMinutes": minutes}


BENCHMARK_RULES: tuple[dict[str, Any], ...] = (
    # big-ticket payments: ~3 % of transactions at 1k/s, the bulk of the latency samples
    _rule(1, ["payeeId"], "paymentAmount", "MAX", "GREATER", 500, 1),
    # spend per payee over the last 10 minutes
    _rule(2, ["payeeId"], "paymentAmount", "SUM", "GREATER", 2000, 10),
    # repeated high spend to one beneficiary within the hour
    _rule(3, ["payeeId", "beneficiaryId"], "paymentAmount", "SUM", "GREATER", 5000, 60),
    # velocity: many payments from one payee within a minute
    _rule(4, ["payeeId"], "COUNT_FLINK", "SUM", "GREATER", 30, 1),
    # a beneficiary collecting from many payments within 5 minutes
    _rule(5, ["beneficiaryId"], "COUNT_FLINK", "SUM", "GREATER_EQUAL", 400, 5),
    # unusually large average received within 30 minutes
    _rule(6, ["beneficiaryId"], "paymentAmount", "AVG", "GREATER", 500, 30),
    # the same pair paying again and again within 15 minutes
    _rule(7, ["payeeId", "beneficiaryId"], "COUNT_FLINK", "SUM", ">=", 12, 15),
    # cash: large cash amounts per payee within 20 minutes
    _rule(8, ["payeeId", "paymentType"], "paymentAmount", "SUM", ">", 1500, 20),
    # smallest payment of a pair within 45 minutes unusually high (card testing in reverse)
    _rule(9, ["payeeId", "beneficiaryId"], "paymentAmount", "MIN", ">", 1000, 45),
    # bursts to one beneficiary counted and reset on every alert (COUNT_WITH_RESET_FLINK)
    _rule(10, ["beneficiaryId"], "COUNT_WITH_RESET_FLINK", "SUM", ">=", 200, 2),
)


def benchmark_rules(n: int = 10) -> list[str]:
    """The first n benchmark rules as `rules` messages (JSON text), n <= 10."""
    if not 0 <= n <= len(BENCHMARK_RULES):
        raise ValueError(f"n must be between 0 and {len(BENCHMARK_RULES)}, got {n}")
    return [json.dumps(rule) for rule in BENCHMARK_RULES[:n]]
