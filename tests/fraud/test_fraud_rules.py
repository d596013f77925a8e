"""Fraud rules (CONTRACTS.md section 7): rule parsing, transaction reading, key text, and the
exact decimal aggregators and limit operators."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from spark_jobs.fraud.core.aggregates import (
    Aggregator,
    Operator,
    aggregate,
    average,
    compare,
    exact_sum,
    field_value,
)
from spark_jobs.fraud.core.keys import (
    JsonDecimal,
    TransactionError,
    grouping_key,
    json_text,
    loads_json,
    parse_transaction,
)
from spark_jobs.fraud.core.rules import ControlType, RuleError, RuleState, parse_rule, rule_json

DEMO_RULE = {
    "ruleId": 1,
    "ruleState": "ACTIVE",
    "groupingKeyNames": ["payeeId", "beneficiaryId"],
    "aggregateFieldName": "paymentAmount",
    "aggregatorFunctionType": "SUM",
    "limitOperatorType": "GREATER",
    "limit": 200000,
    "windowMinutes": 1440,
}


def with_(**changes: object) -> str:
    rule = dict(DEMO_RULE)
    for name, value in changes.items():
        if value is ...:
            rule.pop(name)
        else:
            rule[name] = value
    return json.dumps(rule)


# -- rule parsing ---------------------------------------------------------------------------
def test_the_contract_example_parses_into_every_field():
    rule = parse_rule(json.dumps(DEMO_RULE).encode())
    assert rule.rule_id == 1
    assert rule.state is RuleState.ACTIVE
    assert rule.grouping_key_names == ("payeeId", "beneficiaryId")
    assert rule.aggregate_field == "paymentAmount"
    assert rule.aggregator is Aggregator.SUM
    assert rule.operator is Operator.GREATER
    assert rule.limit == Decimal(200000)
    assert rule.window_ms == 1440 * 60_000
    assert rule.control_type is None
    assert rule.raw == json.dumps(DEMO_RULE)
    assert rule.is_present and not rule.resets_on_fire


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("=", Operator.EQUAL),
        ("!=", Operator.NOT_EQUAL),
        (">", Operator.GREATER),
        ("<", Operator.LESS),
        (">=", Operator.GREATER_EQUAL),
        ("<=", Operator.LESS_EQUAL),
        *[(op.value, op) for op in Operator],
    ],
)
def test_limit_operator_accepts_names_and_symbols(given, expected):
    assert parse_rule(with_(limitOperatorType=given)).operator is expected


@pytest.mark.parametrize("aggregator", list(Aggregator))
def test_every_aggregator_parses(aggregator):
    assert parse_rule(with_(aggregatorFunctionType=aggregator.value)).aggregator is aggregator


def test_limit_keeps_its_received_decimal_text():
    rule = parse_rule('{"ruleId": 2, "ruleState": "PAUSE", "groupingKeyNames": [],'
                      ' "aggregateFieldName": "COUNT_WITH_RESET_FLINK",'
                      ' "aggregatorFunctionType": "AVG", "limitOperatorType": "<=",'
                      ' "limit": 21.50, "windowMinutes": 0, "controlType": null}')
    assert rule.state is RuleState.PAUSE
    assert rule.grouping_key_names == ()
    assert isinstance(rule.limit, JsonDecimal) and rule.limit.text == "21.50"
    assert rule.window_ms == 0
    assert rule.resets_on_fire


def test_delete_needs_only_the_rule_id():
    rule = parse_rule('{"ruleId": 7, "ruleState": "DELETE"}')
    assert (rule.rule_id, rule.state) == (7, RuleState.DELETE)
    # the demo sends the whole rule with DELETE; the other fields are not looked at
    assert parse_rule(with_(ruleState="DELETE", limit="whatever")).state is RuleState.DELETE


@pytest.mark.parametrize("control", list(ControlType))
def test_control_rules_carry_their_control_type(control):
    rule = parse_rule(json.dumps({"ruleState": "CONTROL", "controlType": control.value}))
    assert rule.state is RuleState.CONTROL
    assert rule.control_type is control
    assert rule.rule_id is None
    assert not rule.is_present


def test_unknown_fields_are_ignored():
    assert parse_rule(with_(comment="for the demo", controlType=None)).rule_id == 1


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"\xff\xfe", "not valid UTF-8"),
        ("", "not valid JSON"),
        (None, "empty message"),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "a rule must be a JSON object, got array"),
        (with_(limit=float("nan")), "not valid JSON"),
        (with_(ruleState=...), "missing field 'ruleState'"),
        (with_(ruleState="RUNNING"), "unknown ruleState 'RUNNING'"),
        (with_(ruleState="active"), "unknown ruleState 'active'"),
        (with_(ruleId=...), "missing field 'ruleId'"),
        (with_(ruleId="1"), "'ruleId' must be an integer, got string"),
        (with_(ruleId=1.5), "'ruleId' must be an integer, got number"),
        (with_(ruleId=True), "'ruleId' must be an integer, got boolean"),
        (with_(groupingKeyNames=...), "missing field 'groupingKeyNames'"),
        (with_(groupingKeyNames="payeeId"), "'groupingKeyNames' must be an array"),
        (with_(groupingKeyNames=["payeeId", 3]), "non-empty field names"),
        (with_(groupingKeyNames=["payeeId", "payeeId"]), "names a field twice"),
        (with_(aggregateFieldName=...), "missing field 'aggregateFieldName'"),
        (with_(aggregateFieldName=""), "'aggregateFieldName' must be a non-empty string"),
        (with_(aggregatorFunctionType="MEDIAN"), "unknown aggregatorFunctionType 'MEDIAN'"),
        (with_(aggregatorFunctionType=None), "missing field 'aggregatorFunctionType'"),
        (with_(limitOperatorType="=="), "unknown limitOperatorType '=='"),
        (with_(limitOperatorType=1), "'limitOperatorType' must be a string"),
        (with_(limit=...), "missing field 'limit'"),
        (with_(limit="200000"), "'limit' must be a JSON number, got string"),
        (with_(limit=True), "'limit' must be a JSON number, got boolean"),
        (with_(windowMinutes=...), "missing field 'windowMinutes'"),
        (with_(windowMinutes=-1), "'windowMinutes' must be >= 0"),
        (with_(windowMinutes=1.5), "'windowMinutes' must be an integer"),
        (with_(windowMinutes=2**62), "'windowMinutes' is too large"),
        (with_(ruleState="CONTROL"), "missing field 'controlType'"),
        (with_(ruleState="CONTROL", controlType="REBOOT"), "unknown controlType 'REBOOT'"),
    ],
)
def test_invalid_rules_are_rejected_with_a_reason(raw, reason):
    with pytest.raises(RuleError) as error:
        parse_rule(raw)
    assert reason in str(error.value)


def test_rule_json_is_the_rule_as_received():
    raw = with_(limit=20.5)
    assert rule_json(parse_rule(raw)) == json.loads(raw)


# -- transactions and key text --------------------------------------------------------------
def test_transactions_keep_their_text_and_number_text():
    raw = b' {"transactionId": 1, "eventTime": 1767225600000, "paymentAmount": 21.50} '
    transaction = parse_transaction(raw)
    assert transaction.transaction_id == 1
    assert transaction.event_time == 1767225600000
    assert transaction.fields["paymentAmount"].text == "21.50"
    assert transaction.text == raw.decode().strip()
    assert transaction.id_key == "1"
    assert parse_transaction('{"transactionId": "1", "eventTime": 0}').id_key == '"1"'


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (None, "empty message"),
        (b"\xc3\x28", "not valid UTF-8"),
        ("nope", "not valid JSON"),
        ('{"transactionId": 1, "eventTime": NaN}', "not valid JSON"),
        ("[]", "must be a JSON object"),
        ('{"eventTime": 5}', "missing field 'transactionId'"),
        ('{"transactionId": null, "eventTime": 5}', "'transactionId' must be"),
        ('{"transactionId": 1.5, "eventTime": 5}', "'transactionId' must be"),
        ('{"transactionId": 1}', "missing field 'eventTime'"),
        ('{"transactionId": 1, "eventTime": "5"}', "'eventTime' must be an integer"),
        ('{"transactionId": 1, "eventTime": 5.0}', "'eventTime' must be an integer"),
        ('{"transactionId": 1, "eventTime": true}', "'eventTime' must be an integer"),
    ],
)
def test_unusable_transactions_say_why(raw, reason):
    with pytest.raises(TransactionError) as error:
        parse_transaction(raw)
    assert reason in str(error.value)


def test_key_text_of_the_contract():
    fields = loads_json('{"payeeId": 25, "beneficiaryId": 12}')
    assert grouping_key(fields, ["payeeId", "beneficiaryId"]) == "{payeeId=25;beneficiaryId=12}"
    assert grouping_key(fields, ["beneficiaryId", "payeeId"]) == "{beneficiaryId=12;payeeId=25}"
    assert grouping_key(fields, []) == "{}"


def test_key_values_are_their_json_text_strings_unquoted_missing_null():
    fields = loads_json(
        '{"s": "CSH", "d": 21.50, "e": 1e5, "n": null, "t": true, "f": false, "i": -7,'
        ' "o": {"a": [1, 2.0, "x"]}}'
    )
    names = ["s", "d", "e", "n", "t", "f", "i", "o", "missing"]
    assert grouping_key(fields, names) == (
        '{s=CSH;d=21.50;e=1e5;n=null;t=true;f=false;i=-7;o={"a":[1,2.0,"x"]};missing=null}'
    )


def test_json_text_renders_numbers_as_received():
    assert json_text(loads_json("[0.10, 1E+3, 12345678901234567890.123456789]")) == (
        "[0.10,1E+3,12345678901234567890.123456789]"
    )
    assert json_text(Decimal("2.0")) == "2.0"


# -- aggregators and operators --------------------------------------------------------------
VALUES = [Decimal("21.50"), Decimal("3"), Decimal("-4.25"), Decimal("3")]


@pytest.mark.parametrize(
    ("aggregator", "expected"),
    [
        (Aggregator.SUM, Decimal("23.25")),
        (Aggregator.AVG, Decimal("5.8125")),
        (Aggregator.MIN, Decimal("-4.25")),
        (Aggregator.MAX, Decimal("21.50")),
    ],
)
def test_every_aggregator(aggregator, expected):
    result = aggregate(aggregator, VALUES)
    assert result == expected
    assert str(result) == str(expected)


@pytest.mark.parametrize("aggregator", list(Aggregator))
def test_an_empty_window_has_no_aggregate(aggregator):
    assert aggregate(aggregator, []) is None


@pytest.mark.parametrize(
    ("aggregator", "expected"),
    [(Aggregator.SUM, 4), (Aggregator.AVG, 1), (Aggregator.MIN, 1), (Aggregator.MAX, 1)],
)
def test_count_fields_aggregate_a_one_per_transaction(aggregator, expected):
    ones = [field_value({}, "COUNT_FLINK") for _ in range(4)]
    assert aggregate(aggregator, ones) == expected
    assert field_value({"x": 1}, "COUNT_WITH_RESET_FLINK") == 1


def test_sums_are_exact_where_floats_and_default_decimals_are_not():
    tenths = [Decimal("0.1")] * 10
    assert exact_sum(tenths) == 1
    huge = [Decimal("1E+40"), Decimal("1E-40"), Decimal("-1E+40")]
    assert exact_sum(huge) == Decimal("1E-40")  # the default 28-digit context would give 0


def test_average_is_exact_when_it_fits_and_34_digits_otherwise():
    assert average(Decimal("22.0"), 2) == Decimal("11.0")
    assert str(average(Decimal(10), 3)) == "3.333333333333333333333333333333333"
    assert str(average(Decimal(20), 3)) == "6.666666666666666666666666666666667"  # half-even


def test_field_values_only_count_json_numbers():
    fields = loads_json('{"a": 21.50, "b": 3, "c": "21.5", "d": true, "e": null, "f": [1]}')
    assert field_value(fields, "a") == Decimal("21.50")
    assert type(field_value(fields, "a")) is Decimal  # plain, for the state
    assert field_value(fields, "b") == 3
    for name in ["c", "d", "e", "f", "missing"]:
        assert field_value(fields, name) is None


@pytest.mark.parametrize(
    ("op", "below", "equal", "above"),
    [
        (Operator.EQUAL, False, True, False),
        (Operator.NOT_EQUAL, True, False, True),
        (Operator.GREATER, False, False, True),
        (Operator.LESS, True, False, False),
        (Operator.GREATER_EQUAL, False, True, True),
        (Operator.LESS_EQUAL, True, True, False),
    ],
)
def test_every_operator(op, below, equal, above):
    limit = Decimal("20")
    assert compare(op, Decimal("19.99"), limit) is below
    assert compare(op, Decimal("20.00"), limit) is equal  # numerically equal, other exponent
    assert compare(op, Decimal("20.01"), limit) is above
