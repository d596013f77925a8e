"""Card payments to Kafka at a steady rate, with event time = the wall clock at sending and
the same instant as the Kafka message timestamp, so a consumer can measure latency from a
transaction's arrival in Kafka with its eventTime."""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from spark_jobs.contracts.topics import TOPIC_TRANSACTIONS
from spark_jobs.fraud.traffic.generate import Rendered, generate_transactions, rendered
from spark_jobs.fraud.traffic.spec import DEFAULT_SPEC, TransactionSpec
from spark_jobs.settings import Settings
from spark_jobs.streaming.traffic.sending import Outgoing, ProductionReport, send_paced


@dataclass
class TransactionReport(ProductionReport):
    """A run's report and the transactionId it started from."""

    first_id: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {**super().as_dict(), "first_id": self.first_id}


def produce_transactions(
    settings: Settings,
    rate_per_s: float,
    seconds: float,
    spec: TransactionSpec = DEFAULT_SPEC,
    stop_event: threading.Event | None = None,
    producer: Any = None,
    topic: str = TOPIC_TRANSACTIONS,
) -> TransactionReport:
    """Send rate_per_s transactions per second for `seconds` (or until stop_event is set),
    paced evenly: transaction i leaves at t0 + i / rate. eventTime and the Kafka timestamp
    are both the wall clock (ms) when it is handed to the producer; the key is the payeeId.
    Raises GenerationError when a delivery fails."""
    if rate_per_s <= 0 or seconds <= 0:
        raise ValueError("rate_per_s and seconds must be positive")
    transactions = generate_transactions(spec, math.ceil(rate_per_s * seconds),
                                         rate_per_s=rate_per_s)
    ready = [rendered(transaction) for transaction in transactions]  # before the clock runs
    report = send_paced(_stamped(ready, topic), settings, producer, rate=rate_per_s,
                        stop_event=stop_event)
    return TransactionReport(**dataclasses.asdict(report), first_id=spec.first_id)


def _stamped(ready: Iterable[Rendered], topic: str) -> Iterator[Outgoing]:
    """Each transaction stamped with the wall clock as the loop takes it (its slot came)."""
    for transaction in ready:
        now_ms = int(time.time() * 1000)
        yield Outgoing(topic, transaction.key, transaction.value(now_ms), now_ms)
