"""What the engine emits: alerts, rule errors, exported rules and dead letters.

Each Output carries the exact message text for its topic and the same content as Python
data (numbers as Decimal) for tables and tests. Alerts embed the transaction's received text
as `triggeringEvent`, so the event is published exactly as received (field order and number
text included) without a re-serialisation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from spark_jobs.fraud.core.keys import Transaction
from spark_jobs.fraud.core.rules import Rule

OutputKind = Literal["alert", "rule_error", "current_rule", "dead_letter"]


@dataclass(frozen=True, slots=True)
class Output:
    """One message: kind says the topic/table (alerts, rule_errors, current_rules, dead
    letters), value is the JSON text to publish (a dead letter's value is the received text),
    data the same content as Python data."""

    kind: OutputKind
    value: str
    data: Mapping[str, Any]


def number_text(number: Decimal) -> str:
    """A Decimal as a JSON number: its received text when it has one (see keys.JsonDecimal).
    str() of a finite Decimal is always valid JSON number syntax (e.g. 22.0, 1E+5)."""
    return getattr(number, "text", None) or str(number)


def alert(
    rule: Rule, key: str, aggregate: Decimal, transaction: Transaction, alert_time_ms: int
) -> Output:
    """The `alerts` message of one firing."""
    value = (
        f'{{"ruleId":{rule.rule_id},"groupingKey":{json.dumps(key, ensure_ascii=False)},'
        f'"aggregate":{number_text(aggregate)},"limit":{number_text(rule.limit)},'
        f'"triggeringEvent":{transaction.text},"alertTime":{alert_time_ms}}}'
    )
    data = {
        "ruleId": rule.rule_id,
        "groupingKey": key,
        "aggregate": aggregate,
        "limit": rule.limit,
        "triggeringEvent": transaction.fields,
        "alertTime": alert_time_ms,
    }
    return Output("alert", value, data)


def rule_error(raw_text: str, error: str) -> Output:
    """The `rule_errors` message for an invalid rule."""
    data = {"rule": raw_text, "error": error}
    return Output("rule_error", json.dumps(data, ensure_ascii=False), data)


def current_rule(rule: Rule) -> Output:
    """One `current_rules` message of EXPORT_RULES_CURRENT: the rule as last received."""
    return Output("current_rule", rule.raw, {"ruleId": rule.rule_id, "rule": rule.raw})


def dead_letter(raw_text: str, reason: str) -> Output:
    """A transaction that cannot be evaluated, with the reason."""
    return Output("dead_letter", raw_text, {"reason": reason, "raw": raw_text})
