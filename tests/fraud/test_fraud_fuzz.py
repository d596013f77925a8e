"""Property-based fuzzing of fraud_rules' parsers and per-message path (CONTRACTS section 9):
whatever the bytes, a message is used or lands in dead letters / rule_errors with a reason; no
exception escapes; every output encodes, fits the job's Arrow rows and stays bounded; and the
valid rules in between keep alerting as they would without the hostile messages."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
from helpers.hostile import messages
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_jobs.contracts.reasons import DEAD_LETTER_REASONS, DUPLICATE
from spark_jobs.contracts.topics import TOPIC_TRANSACTIONS
from spark_jobs.fraud.core.engine import FraudEngine, MemoryStore
from spark_jobs.fraud.core.keys import TransactionError, parse_transaction
from spark_jobs.fraud.core.output_rows import (
    ARROW_OUTPUT_SCHEMA,
    output_fields,
    output_table,
    output_values,
)
from spark_jobs.fraud.core.outputs import MAX_DETAIL_CHARS, MAX_ECHO_BYTES, MAX_OUTPUT_BYTES
from spark_jobs.fraud.core.rules import RuleError, parse_rule
from spark_jobs.fraud.jobs.engine_host import InputRow

T0 = 1_767_225_600_000
TRANSACTION = {"transactionId": 1, "eventTime": T0, "payeeId": 1, "beneficiaryId": 2,
               "paymentAmount": 21.5, "paymentType": "CSH"}
RULE = {"ruleId": 1, "ruleState": "ACTIVE", "groupingKeyNames": ["payeeId", "beneficiaryId"],
        "aggregateFieldName": "paymentAmount", "aggregatorFunctionType": "SUM",
        "limitOperatorType": ">", "limit": 20, "windowMinutes": 10}
RULE_FIELDS = [*RULE, "controlType"]
FUZZ = settings(max_examples=100, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SOURCE = InputRow("transaction", b"", TOPIC_TRANSACTIONS, 0, 0, 0, None)

transactions = messages(TRANSACTION, list(TRANSACTION))
rules = st.one_of(messages(RULE, RULE_FIELDS),
                  messages({**RULE, "ruleState": "CONTROL",
                            "controlType": "EXPORT_RULES_CURRENT"}, RULE_FIELDS))
as_text = st.binary(max_size=64).map(lambda b: b.decode("utf-8", "surrogateescape")
                                     .replace("\udc80", "\ud800"))


def well_formed(outputs: list[Any]) -> None:
    """What every output of the engine must be, whatever its input."""
    for output in outputs:
        assert output.kind in {"alert", "rule_error", "current_rule", "dead_letter", "dropped"}
        assert len(output.value.encode("utf-8")) <= MAX_OUTPUT_BYTES
        if output.kind == "dead_letter":
            assert output.data["reason"] in DEAD_LETTER_REASONS
            assert 0 < len(output.data["detail"]) <= MAX_DETAIL_CHARS
            assert len(output.value.encode()) <= MAX_ECHO_BYTES
        if output.kind == "rule_error":
            assert output.data["error"] and len(output.data["rule"].encode()) <= MAX_ECHO_BYTES
        if output.kind == "dropped":
            assert output.data["reason"] == DUPLICATE
        if output.kind in {"alert", "rule_error", "current_rule"}:
            json.loads(output.value)
    by_row = pa.Table.from_pylist([output_fields(0, o, SOURCE) for o in outputs],
                                  schema=ARROW_OUTPUT_SCHEMA)
    # the job's conversion, column by column, makes the very same table
    assert output_table([output_values(0, o, SOURCE) for o in outputs]).equals(by_row)


@FUZZ
@given(st.one_of(rules, as_text))
def test_the_rule_parser_accepts_or_explains(raw: bytes | str) -> None:
    try:
        rule = parse_rule(raw)
    except RuleError as error:
        assert str(error)
        return
    rule.raw.encode("utf-8")


@FUZZ
@given(st.one_of(transactions, as_text))
def test_the_transaction_parser_accepts_or_explains(raw: bytes | str) -> None:
    try:
        transaction = parse_transaction(raw)
    except TransactionError as error:
        assert str(error)
        return
    transaction.text.encode("utf-8")


def payment(k: int) -> str:
    return json.dumps({**TRANSACTION, "transactionId": 10_000 + k, "eventTime": T0 + k,
                       "paymentAmount": 7.5})


@FUZZ
@given(st.lists(st.tuples(st.booleans(), st.one_of(transactions, rules, as_text)),
                max_size=12))
def test_the_engine_survives_any_messages_between_valid_ones(hostile: list[Any]) -> None:
    engine = FraudEngine(MemoryStore(pickled=True), max_message_bytes=1 << 16)
    well_formed(engine.on_rule(json.dumps(RULE), 0))
    for k, (as_rule, raw) in enumerate(hostile):
        outputs = engine.on_rule(raw, k) if as_rule else engine.on_transaction(raw, 0, k)
        well_formed(outputs)
        well_formed(engine.on_transaction(payment(k), 0, k))
    engine.cleanup(T0 + 60_000)
    # whatever came before, a fresh rule sees exactly what arrives while it is present
    fresh = {**RULE, "ruleId": 99, "groupingKeyNames": ["paymentType"],
             "aggregateFieldName": "COUNT_FLINK", "limit": 1}
    assert engine.on_rule(json.dumps(fresh), 10**6) == []
    first = engine.on_transaction(payment(10**5), 0, 0)
    second = engine.on_transaction(payment(10**5 + 1), 0, 0)
    well_formed(first + second)
    assert [o.data["aggregate"] for o in second if o.data.get("ruleId") == 99] == [2]
    assert not [o for o in first if o.data.get("ruleId") == 99]
