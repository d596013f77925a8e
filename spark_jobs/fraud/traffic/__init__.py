"""Synthetic card-payment traffic for the fraud_rules job: transactions and benchmark rules.

The spec (spec.py) says what the traffic looks like; `generate_transactions` (generate.py)
is pure and seeded: the same spec gives the same transactions, field for field. Payees and
beneficiaries are drawn from Zipf-like popularity curves (a few very busy accounts, a long
tail), and a payee pays one of a few regular beneficiaries most of the time, so that windows
keyed by payee, by beneficiary and by the pair all see repeats. Amounts are log-normal with
two decimals (median `amount_median`).

`produce_transactions` (kafka.py) sends such transactions to the `transactions` topic at a
steady rate with the shared paced producing loop (spark_jobs.streaming.traffic), event time
= wall clock at sending, and the same instant as the Kafka message timestamp, so a consumer
can measure latency from a transaction's arrival in Kafka with its eventTime.

`benchmark_rules` are ten rules of the public Flink demo's form over these fields (CONTRACTS.md
section 7), sized so that together they fire for a few per cent of transactions.
"""

from spark_jobs.fraud.traffic.benchmark_rules import BENCHMARK_RULES, benchmark_rules
from spark_jobs.fraud.traffic.generate import generate_transactions, transaction_text
from spark_jobs.fraud.traffic.kafka import TransactionReport, produce_transactions
from spark_jobs.fraud.traffic.spec import TransactionSpec
from spark_jobs.streaming.traffic import DEFAULT_START_MS

__all__ = [
    "BENCHMARK_RULES",
    "DEFAULT_START_MS",
    "TransactionReport",
    "TransactionSpec",
    "benchmark_rules",
    "generate_transactions",
    "produce_transactions",
    "transaction_text",
]
