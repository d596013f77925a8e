"""fraud_rules on hostile input (CONTRACTS section 9), without Spark: every hostile kind of
transaction and rule, bounded echoes, a dozen transactions from the future in the driver's
evaluation, isolation of one failing message, and the drop counts of a batch."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest
from helpers.hostile import TEN_YEARS_MS, hostile_messages

from spark_jobs.contracts.topics import TOPIC_RULES, TOPIC_TRANSACTIONS
from spark_jobs.fraud.core.engine import FraudEngine, MemoryStore
from spark_jobs.fraud.core.isolation import apply_rule, isolated
from spark_jobs.fraud.core.keys import TransactionError, parse_transaction
from spark_jobs.fraud.core.output_rows import (
    ARROW_OUTPUT_SCHEMA,
    KIND_RULE,
    KIND_TRANSACTION,
    output_fields,
    output_table,
    output_values,
)
from spark_jobs.fraud.core.outputs import MAX_ECHO_BYTES, MAX_OUTPUT_BYTES
from spark_jobs.fraud.core.rules import MAX_RULE_BYTES, RuleError, parse_rule
from spark_jobs.fraud.jobs.engine_host import InputRow, evaluate_batch
from spark_jobs.fraud.jobs.fraud_driver import FraudDriverSink

T0 = 1_767_225_600_000
HOUR = 3_600_000
SMALL = 4096  # jobs.max_message_bytes of these tests
TRANSACTION = {"transactionId": 1, "eventTime": T0, "payeeId": 1, "beneficiaryId": 2,
               "paymentAmount": 21.5, "paymentType": "CSH", "note": "x"}
RULE = {"ruleId": 1, "ruleState": "ACTIVE", "groupingKeyNames": ["payeeId"],
        "aggregateFieldName": "paymentAmount", "aggregatorFunctionType": "SUM",
        "limitOperatorType": ">", "limit": 20, "windowMinutes": 10}
HOSTILE_TRANSACTIONS = hostile_messages(
    TRANSACTION, int_field="transactionId", string_field="note", time_field="eventTime",
    number_field="paymentAmount", max_message_bytes=SMALL)
HOSTILE_RULES = hostile_messages(RULE, int_field="ruleId", string_field="aggregateFieldName",
                                 time_field=None, number_field="limit", max_message_bytes=SMALL)


def engine_with_rule(**rule: Any) -> FraudEngine:
    engine = FraudEngine(MemoryStore(), max_message_bytes=SMALL)
    assert engine.on_rule(json.dumps({**RULE, **rule}), 0) == []
    return engine


def encodable(outputs: list[Any]) -> None:
    """Every output encodes as UTF-8 and converts to the job's Arrow rows."""
    for output in outputs:
        output.value.encode("utf-8")
    source = InputRow(KIND_TRANSACTION, b"", TOPIC_TRANSACTIONS, 0, 0, 0, None)
    by_row = pa.Table.from_pylist([output_fields(0, o, source) for o in outputs],
                                  schema=ARROW_OUTPUT_SCHEMA)
    # the job's conversion, column by column, makes the very same table
    assert output_table([output_values(0, o, source) for o in outputs]).equals(by_row)


@pytest.mark.parametrize(("label", "message", "reason"), HOSTILE_TRANSACTIONS,
                         ids=[m[0] for m in HOSTILE_TRANSACTIONS])
def test_every_hostile_transaction_is_a_dead_letter_with_its_reason(label, message, reason):
    engine = engine_with_rule()
    outputs = engine.on_transaction(message, 0, 0)
    encodable(outputs)
    if reason == "future":  # decided before the engine (see the driver test below)
        return
    (dead,) = outputs
    assert (dead.kind, dead.data["reason"]) == ("dead_letter", "malformed"), dead.data
    assert dead.data["detail"]
    assert len(dead.value.encode()) <= MAX_ECHO_BYTES
    assert len(engine.on_transaction(json.dumps(TRANSACTION), 0, 0)) == 1, "state untouched"


@pytest.mark.parametrize(("label", "message", "reason"), HOSTILE_RULES,
                         ids=[m[0] for m in HOSTILE_RULES])
def test_every_hostile_rule_is_a_rule_error_that_changes_nothing(label, message, reason):
    engine = engine_with_rule(limit=1000)
    (error,) = engine.on_rule(message, 1)
    encodable([error])
    assert error.kind == "rule_error" and error.data["error"]
    assert len(error.value.encode()) <= MAX_OUTPUT_BYTES
    assert len(error.data["rule"].encode()) <= MAX_ECHO_BYTES
    assert [r.limit for r in engine.rules()] == [1000]


@pytest.mark.parametrize(("literal", "detail"), [
    ("0e-999999999", "exponent"), ("0e999999999", "exponent"), ("1e999999999", "float"),
    ("-1e-400", "float"), ("9223372036854775808", "64-bit"),
])
def test_numbers_that_could_blow_up_exact_sums_are_malformed(literal, detail):
    text = json.dumps(TRANSACTION).replace("21.5", literal)
    with pytest.raises(TransactionError, match=detail):
        parse_transaction(text)
    with pytest.raises(RuleError, match=detail):
        parse_rule(json.dumps(RULE).replace('"limit": 20', f'"limit": {literal}'))


def test_event_times_beyond_the_year_9999_and_huge_windows_are_refused():
    with pytest.raises(TransactionError, match="9999"):
        parse_transaction(json.dumps({**TRANSACTION, "eventTime": 10**18}))
    assert parse_transaction(json.dumps({**TRANSACTION, "eventTime": -5})).event_time == -5
    with pytest.raises(RuleError, match="too large"):
        parse_rule(json.dumps({**RULE, "windowMinutes": 2**62 // 60_000 + 1}))


def test_a_rule_larger_than_64_kib_is_an_error_echoed_cut_and_marked():
    big = json.dumps({**RULE, "comment": "y" * MAX_RULE_BYTES})
    engine = FraudEngine(MemoryStore())
    (error,) = engine.on_rule(big, 0)
    message = json.loads(error.value)
    assert "larger than 65536 bytes" in message["error"]
    assert message["truncated"] is True and message["receivedBytes"] == len(big)
    assert big.startswith(message["rule"]) and len(message["rule"]) == MAX_ECHO_BYTES
    assert engine.rules() == []


def test_lone_surrogates_in_python_text_never_reach_an_output():
    engine = engine_with_rule()
    for raw in ('{"ruleId": 1, "ruleState": "\ud800"}', "\udfff garbage"):
        (error,) = engine.on_rule(raw, 1)
        encodable([error])
    (dead,) = engine.on_transaction('{"transactionId": "\ud800", "eventTime": 1}', 0, 0)
    encodable([dead])
    assert dead.data["reason"] == "malformed"


def test_a_large_transaction_is_echoed_in_the_truncated_form():
    engine = FraudEngine(MemoryStore())
    engine.on_rule(json.dumps({**RULE, "groupingKeyNames": ["payeeId", "paymentType"]}), 0)
    raw = json.dumps({**TRANSACTION, "transactionId": "t-1", "pad": "z" * 100_000})
    (alert,) = engine.on_transaction(raw, 0, 5)
    message = json.loads(alert.value)
    assert message["triggeringEvent"] == {
        "transactionId": "t-1", "eventTime": T0, "payeeId": 1, "paymentType": "CSH",
        "truncated": True, "receivedBytes": len(raw)}
    assert (message["groupingKey"], message["aggregate"]) == ("{payeeId=1;paymentType=CSH}", 21.5)
    (row,) = [output_fields(0, alert, InputRow("transaction", raw.encode(), "t", 0, 3, 0, None))]
    assert (row["transaction_id"], row["event_time"]) == ("t-1", T0)


def test_an_alert_too_large_even_truncated_is_an_error_dead_letter():
    engine = FraudEngine(MemoryStore())
    engine.on_rule(json.dumps({**RULE, "groupingKeyNames": ["note"]}), 0)
    raw = json.dumps({**TRANSACTION, "note": "n" * MAX_OUTPUT_BYTES})
    (dead,) = engine.on_transaction(raw, 0, 5)
    assert (dead.kind, dead.data["reason"]) == ("dead_letter", "error")
    assert "alert of rule 1" in dead.data["detail"]
    assert len(dead.value.encode()) == MAX_ECHO_BYTES


def test_one_failing_message_is_an_error_dead_letter_and_the_engine_goes_on():
    engine = engine_with_rule()

    def half_applied() -> list[Any]:  # a rule change that fails half-way
        engine._records.clear()
        raise RuntimeError("boom \ud800")

    (dead,) = isolated(engine, b"raw", half_applied)
    assert (dead.kind, dead.data["reason"], dead.value) == ("dead_letter", "error", "raw")
    assert dead.data["detail"] == "RuntimeError: boom ?"
    assert [r.rule_id for r in engine.rules()] == [1], "the rules as last saved"
    assert [o.kind for o in engine.on_transaction(json.dumps(TRANSACTION), 0, 0)] == ["alert"]
    assert apply_rule(engine, json.dumps({**RULE, "ruleId": 2}), 1) == []


def event_time(raw: bytes | None) -> int | None:
    """The eventTime Spark's plan reads (a JSON integer of a JSON object), else None."""
    try:
        value = json.loads(raw or b"").get("eventTime")
    except (ValueError, AttributeError, RecursionError):
        return None
    return value if isinstance(value, int) else None


def batch(rows: list[tuple[str, int, Any]]) -> pa.Table:
    """A driver batch of (kind, Kafka time, message), future_by_ms as with_event_time sets it."""
    columns: dict[str, list[Any]] = {name: [] for name in InputRow._fields}
    for offset, (kind, at, message) in enumerate(rows):
        raw = message if isinstance(message, bytes | None) else json.dumps(message).encode()
        ahead = event_time(raw) - at if event_time(raw) is not None else None
        row = InputRow(kind, raw, TOPIC_RULES if kind == KIND_RULE else TOPIC_TRANSACTIONS, 0,
                       offset, at, None, ahead if ahead is not None and ahead > HOUR else None)
        for name, value in zip(InputRow._fields, row, strict=True):
            columns[name].append(value)
    return pa.table(columns)


def normal_traffic() -> list[tuple[str, int, Any]]:
    payments = [{**TRANSACTION, "transactionId": k, "eventTime": T0 + k * 1000,
                 "paymentAmount": 7.5} for k in range(10, 20)]
    return [(KIND_TRANSACTION, p["eventTime"], p) for p in payments]


def test_a_dozen_transactions_from_the_future_change_nothing_in_the_driver(make_settings):
    sink = FraudDriverSink(make_settings(jobs={"max_message_bytes": SMALL}))
    rules = [(KIND_RULE, T0 - 1, RULE)]
    ahead = [(KIND_TRANSACTION, T0, {**TRANSACTION, "transactionId": 100 + k,
                                     "eventTime": T0 + TEN_YEARS_MS + k}) for k in range(12)]
    hostile = [(KIND_TRANSACTION, T0, m) for _, m, _ in HOSTILE_TRANSACTIONS]
    redelivered = [normal_traffic()[0]]

    def alerts_of(*batches: list[tuple[str, int, Any]]) -> tuple[list[Any], pa.Table]:
        engine = FraudEngine(MemoryStore(), max_message_bytes=SMALL)
        out = [evaluate_batch(engine, batch(rows), 0)[0] for rows in batches]
        alerts = [(r["rule_id"], r["transaction_id"], r["aggregate"]) for t in out
                  for r in t.to_pylist() if r["kind"] == "alert"]
        return alerts, out[0]

    expected, _ = alerts_of(rules, normal_traffic())
    assert len(expected) == 8
    got, first = alerts_of(rules + ahead + hostile, normal_traffic() + redelivered)
    assert got == expected
    dead = sink.dead_rows(first).to_pylist()
    assert [d["reason"] for d in dead] == ["future"] * 12 + [r for _, _, r in HOSTILE_TRANSACTIONS]
    assert all("ahead of its Kafka timestamp" in d["detail"] for d in dead[:12])
    counts = sink.drop_counts(first)
    assert counts == {"future": 13, "malformed": len(HOSTILE_TRANSACTIONS) - 1}
    _, second = alerts_of(rules + normal_traffic() + redelivered)
    assert sink.drop_counts(second) == {"duplicate": 1}
