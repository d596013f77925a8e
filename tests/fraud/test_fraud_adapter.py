"""The Spark adapter's pure parts: arrival order, output rows, de-duplication of broadcasts."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pyarrow as pa

from spark_jobs.fraud.core.engine import FraudEngine, MemoryStore
from spark_jobs.fraud.core.output_rows import arrival_order, output_values
from spark_jobs.fraud.jobs.alerts_sink import _first_per_source
from spark_jobs.fraud.processors.shard_processor import OUTPUT_SCHEMA
from spark_jobs.streaming.bucketed.frames import to_frame


def source(kind: str, ts: int, topic: str, partition: int, offset: int) -> SimpleNamespace:
    return SimpleNamespace(kind=kind, kafka_timestamp=ts, kafka_topic=topic,
                           kafka_partition=partition, kafka_offset=offset, kafka_key=None)


def test_arrival_order_is_kafka_time_then_rules_first_then_offsets():
    rows = [source("transaction", 5, "transactions", 0, 9), source("rule", 5, "rules", 1, 0),
            source("transaction", 4, "transactions", 1, 3),
            source("transaction", 5, "transactions", 0, 2)]
    ordered = sorted(rows, key=arrival_order)
    assert [(r.kafka_timestamp, r.kind, r.kafka_offset) for r in ordered] == [
        (4, "transaction", 3), (5, "rule", 0), (5, "transaction", 2), (5, "transaction", 9)]


def test_an_alert_row_carries_the_exact_numbers_and_its_cause():
    engine = FraudEngine(MemoryStore())
    engine.on_rule(json.dumps({
        "ruleId": 4, "ruleState": "ACTIVE", "groupingKeyNames": ["payeeId"],
        "aggregateFieldName": "paymentAmount", "aggregatorFunctionType": "SUM",
        "limitOperatorType": ">", "limit": 0.1, "windowMinutes": 1}), 0)
    [alert] = engine.on_transaction(
        '{"transactionId": "t1", "eventTime": 1000, "payeeId": 2, "paymentAmount": 0.30}',
        -(2**62), 77)
    values = output_values(1, alert, source("transaction", 9, "transactions", 0, 5))
    row = SimpleNamespace(**to_frame([values], OUTPUT_SCHEMA).to_dict("records")[0])
    assert (row.kind, row.rule_id, row.grouping_key, row.aggregate, row.limit) == (
        "alert", 4, "{payeeId=2}", "0.30", "0.1")
    assert (row.transaction_id, row.event_time, row.alert_time) == ("t1", 1000, 77)
    assert (row.topic, row.partition, row.offset, row.shard) == ("transactions", 0, 5, 1)
    assert json.loads(row.value)["triggeringEvent"]["paymentAmount"] == 0.3


def test_outputs_of_a_broadcast_message_are_kept_once():
    table = pa.table({
        "kind": ["rule_error"] * 3, "value": ["a", "a", "b"], "shard": [1, 0, 0],
        "topic": ["rules"] * 3, "partition": [0, 0, 0], "offset": [7, 7, 8],
        "kafka_timestamp": [1, 1, 2],
    })
    kept = _first_per_source(table)
    assert kept["value"].to_pylist() == ["a", "b"] and kept["shard"].to_pylist() == [0, 0]


def test_shard_keys_spread_over_every_partition() -> None:
    from spark_jobs.fraud.processors.shard_placement import partition_of, shard_keys

    assert partition_of(0, 2) == partition_of(1, 2), "why plain 0..n-1 keys do not spread"
    for shards, partitions in [(1, 1), (2, 2), (3, 2), (4, 4), (8, 3)]:
        keys = shard_keys(shards, partitions)
        assert len(set(keys)) == shards
        assert [partition_of(k, partitions) for k in keys] == [
            i % partitions for i in range(shards)]
    assert shard_keys(2, 2) == shard_keys(2, 2) == [2, 0], "stable across restarts"
