"""The synthetic fraud traffic of the benchmarks: seeded, contract-shaped, skewed; rules valid."""

from __future__ import annotations

import json
from collections import Counter
from decimal import Decimal
from itertools import islice

import pytest

from spark_jobs.fraud.core.aggregates import Aggregator
from spark_jobs.fraud.core.engine import FraudEngine, MemoryStore
from spark_jobs.fraud.core.keys import parse_transaction
from spark_jobs.fraud.core.rules import RuleState, parse_rule
from spark_jobs.fraud.traffic import (
    DEFAULT_START_MS,
    TransactionSpec,
    benchmark_rules,
    generate_transactions,
    produce_transactions,
    transaction_text,
)
from spark_jobs.fraud.traffic.generate import rendered

FIELDS = {"transactionId", "eventTime", "payeeId", "beneficiaryId", "paymentAmount",
          "paymentType"}


def test_same_seed_same_transactions_other_seed_other_ones():
    spec = TransactionSpec(seed=3)
    first = list(generate_transactions(spec, 500))
    assert first == list(generate_transactions(spec, 500))
    assert first != list(generate_transactions(TransactionSpec(seed=4), 500))


def test_fields_ids_event_times_and_amounts():
    spec = TransactionSpec(payees=50, beneficiaries=20, first_id=100)
    found = list(generate_transactions(spec, 2000, start_ms=DEFAULT_START_MS, rate_per_s=500))
    assert all(set(t) == FIELDS for t in found)
    assert [t["transactionId"] for t in found] == list(range(100, 2100))
    assert found[0]["eventTime"] == DEFAULT_START_MS
    assert found[-1]["eventTime"] == DEFAULT_START_MS + 1999 * 2  # 500/s: one every 2 ms
    assert {t["payeeId"] for t in found} <= set(range(1, 51))
    assert {t["beneficiaryId"] for t in found} <= set(range(1, 21))
    assert {t["paymentType"] for t in found} == {"CRD", "CSH"}
    for t in found:
        amount = t["paymentAmount"]
        assert amount >= 0.01 and round(amount, 2) == amount


def test_the_message_text_parses_as_a_contract_transaction_with_two_decimal_amounts():
    for t in generate_transactions(count=200):
        parsed = parse_transaction(transaction_text(t))
        assert parsed.transaction_id == t["transactionId"]
        assert parsed.event_time == t["eventTime"]
        amount = parsed.fields["paymentAmount"]
        assert isinstance(amount, Decimal) and -amount.as_tuple().exponent <= 2


def test_popularity_is_skewed_and_uniform_without_skew():
    def top_share(skew: float) -> float:
        spec = TransactionSpec(payees=1000, skew=skew, regular_share=0)
        counts = Counter(t["payeeId"] for t in generate_transactions(spec, 20_000))
        return counts.most_common(1)[0][1] / 20_000

    assert top_share(1.0) > 0.08  # 1 / H(1000) = 13 %
    assert top_share(0.0) < 0.005


def test_payees_mostly_pay_their_regular_beneficiaries():
    spec = TransactionSpec(payees=10, beneficiaries=10_000, regular_share=0.9)
    pairs = Counter((t["payeeId"], t["beneficiaryId"])
                    for t in generate_transactions(spec, 5000))
    assert sum(count for _, count in pairs.most_common(30)) > 0.85 * 5000


def test_invalid_specs_are_refused():
    with pytest.raises(ValueError):
        TransactionSpec(payees=0)
    with pytest.raises(ValueError):
        TransactionSpec(regular_share=1.5)
    with pytest.raises(ValueError):
        list(generate_transactions(count=1, rate_per_s=0))


def test_benchmark_rules_parse_and_mix_functions_keys_and_windows():
    rules = [parse_rule(text) for text in benchmark_rules()]
    assert [r.rule_id for r in rules] == list(range(1, 11))
    assert all(r.state is RuleState.ACTIVE for r in rules)
    assert {r.aggregator for r in rules} >= {Aggregator.SUM, Aggregator.AVG, Aggregator.MAX}
    assert {r.aggregate_field for r in rules} >= {"COUNT_FLINK", "paymentAmount"}
    assert len({r.grouping_key_names for r in rules}) >= 4
    minutes = {r.window_ms // 60_000 for r in rules}
    assert min(minutes) == 1 and max(minutes) == 60
    assert [json.loads(t)["ruleId"] for t in benchmark_rules(3)] == [1, 2, 3]
    with pytest.raises(ValueError):
        benchmark_rules(11)


def test_the_rules_fire_for_a_few_per_cent_of_the_traffic():
    engine = FraudEngine(MemoryStore())
    for text in benchmark_rules():
        assert engine.on_rule(text, 0) == []
    alerted = 0
    for t in generate_transactions(count=20_000, rate_per_s=1000):
        alerted += bool(engine.on_transaction(transaction_text(t), 0, 0))
    assert 0.01 < alerted / 20_000 < 0.10


def test_a_rendered_transaction_is_its_text_with_the_event_time_spliced_in():
    for t in generate_transactions(count=500):
        ready = rendered(t)
        for event_time in (0, -5, 1_767_225_600_123, t["eventTime"]):
            assert ready.value(event_time) == transaction_text({**t, "eventTime": event_time})
        assert ready.key == str(t["payeeId"])
    with pytest.raises(ValueError, match="starts with transactionId and eventTime"):
        rendered({"eventTime": 1, "transactionId": 2})


class _FakeProducer:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, str, int]] = []

    def produce(self, topic, value, key, timestamp, on_delivery):
        self.sent.append((topic, value, key, timestamp))

    def poll(self, _timeout):
        return 0

    def flush(self, _timeout):
        return 0


def test_produce_paces_and_stamps_event_time_with_the_kafka_timestamp():
    fake = _FakeProducer()
    report = produce_transactions(None, rate_per_s=200, seconds=0.25, producer=fake)  # type: ignore[arg-type]
    assert report.sent == len(fake.sent) == 50
    assert report.elapsed_s >= 0.24
    for topic, value, key, timestamp in islice(fake.sent, 50):
        record = json.loads(value)
        assert topic == "transactions"
        assert record["eventTime"] == timestamp
        assert key == str(record["payeeId"])
