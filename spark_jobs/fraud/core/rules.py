"""Rule messages of the `rules` topic: parsing, validation and the rule as last received.

Rules arrive in the JSON form of the public Flink fraud-detection demo. Parsing is strict and
explains itself, because an invalid rule is answered on `rule_errors` with the reason and must
change nothing: a rule that could be half-understood is rejected rather than guessed.
Unknown extra fields are ignored (the demo's messages carry a few), and a DELETE needs only
its ruleId, since the demo sends the whole rule with ruleState DELETE.

A rule passes the JSON gate first (contracts/json_gate) and may be at most MAX_RULE_BYTES:
rules are written by people, and what is accepted is echoed whole on `current_rules`, so the
bound keeps every such message far below what a broker accepts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from typing import Any, TypeVar

from spark_jobs.contracts.json_gate import DEFAULT_MAX_MESSAGE_BYTES, MalformedJson
from spark_jobs.contracts.records import json_type
from spark_jobs.fraud.core.aggregates import (
    COUNT_WITH_RESET_FLINK,
    OPERATOR_SYMBOLS,
    Aggregator,
    Operator,
)
from spark_jobs.fraud.core.keys import gated_json

MINUTE_MS = 60_000
# window_ms plus any event time (and the late retention) must fit a Spark long: clean-up
# timers are event times plus windows
MAX_WINDOW_MINUTES = 2**62 // MINUTE_MS
MAX_RULE_BYTES = 64 * 1024


class RuleState(StrEnum):
    ACTIVE = "ACTIVE"
    PAUSE = "PAUSE"
    DELETE = "DELETE"
    CONTROL = "CONTROL"


class ControlType(StrEnum):
    DELETE_RULES_ALL = "DELETE_RULES_ALL"
    CLEAR_STATE_ALL = "CLEAR_STATE_ALL"
    EXPORT_RULES_CURRENT = "EXPORT_RULES_CURRENT"


class RuleError(ValueError):
    """An invalid rule message; str() is the reason published on `rule_errors`."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One validated rule message.

    ACTIVE and PAUSE rules carry every field; a DELETE carries its rule_id only; a CONTROL
    carries its control_type (and rule_id when the message had one)."""

    rule_id: int | None
    state: RuleState
    grouping_key_names: tuple[str, ...] = ()
    aggregate_field: str = ""
    aggregator: Aggregator = Aggregator.SUM
    operator: Operator = Operator.GREATER
    limit: Decimal = field(default_factory=Decimal)
    window_ms: int = 0
    control_type: ControlType | None = None
    raw: str = ""

    @property
    def is_present(self) -> bool:
        """ACTIVE and PAUSE rules exist (collect transactions); only ACTIVE ones alert."""
        return self.state is RuleState.ACTIVE or self.state is RuleState.PAUSE

    @property
    def resets_on_fire(self) -> bool:
        return self.aggregate_field == COUNT_WITH_RESET_FLINK

    def keeps_state_of(self, old: Rule) -> bool:
        """Whether this update of `old` keeps its windows: same groupingKeyNames and same
        aggregateFieldName; any other update starts empty (CONTRACTS.md section 7)."""
        return (self.grouping_key_names, self.aggregate_field) == (
            old.grouping_key_names, old.aggregate_field)


E = TypeVar("E", bound=StrEnum)


def _require(obj: dict[str, Any], name: str) -> Any:
    if name not in obj or obj[name] is None:
        raise RuleError(f"missing field '{name}'")
    return obj[name]


def _enum(obj: dict[str, Any], name: str, enum: type[E]) -> E:
    value = _require(obj, name)
    if not isinstance(value, str):
        raise RuleError(f"'{name}' must be a string, got {json_type(value)}")
    try:
        return enum(value)
    except ValueError:
        expected = ", ".join(member.value for member in enum)
        raise RuleError(f"unknown {name} '{value}' (expected one of {expected})") from None


def _integer(obj: dict[str, Any], name: str) -> int:
    value = _require(obj, name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise RuleError(f"'{name}' must be an integer, got {json_type(value)} {value}")
    return value


def _operator(obj: dict[str, Any]) -> Operator:
    value = _require(obj, "limitOperatorType")
    if not isinstance(value, str):
        raise RuleError(f"'limitOperatorType' must be a string, got {json_type(value)}")
    if value in OPERATOR_SYMBOLS:
        return OPERATOR_SYMBOLS[value]
    if value in Operator.__members__:
        return Operator(value)
    names = ", ".join(member.value for member in Operator)
    symbols = " ".join(OPERATOR_SYMBOLS)
    raise RuleError(f"unknown limitOperatorType '{value}' (expected one of {names} or {symbols})")


def _grouping_key_names(obj: dict[str, Any]) -> tuple[str, ...]:
    names = _require(obj, "groupingKeyNames")
    if not isinstance(names, list):
        raise RuleError(f"'groupingKeyNames' must be an array, got {json_type(names)}")
    for name in names:
        if not isinstance(name, str) or not name:
            raise RuleError("'groupingKeyNames' must hold non-empty field names")
    if len(set(names)) != len(names):
        raise RuleError("'groupingKeyNames' names a field twice")
    return tuple(names)


def _limit(obj: dict[str, Any]) -> Decimal:
    limit = _require(obj, "limit")
    if isinstance(limit, bool) or not isinstance(limit, int | Decimal):
        raise RuleError(f"'limit' must be a JSON number, got {json_type(limit)}")
    # A JsonDecimal keeps its received text for the alert; ints become exact Decimals.
    return limit if isinstance(limit, Decimal) else Decimal(limit)


def _window_ms(obj: dict[str, Any]) -> int:
    minutes = _integer(obj, "windowMinutes")
    if minutes < 0:
        raise RuleError(f"'windowMinutes' must be >= 0, got {minutes}")
    if minutes > MAX_WINDOW_MINUTES:
        raise RuleError(f"'windowMinutes' is too large ({minutes})")
    return minutes * MINUTE_MS


def parse_rule(raw: bytes | str | None, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> Rule:
    """Validate one `rules` message; RuleError carries the reason for anything invalid."""
    try:
        text, obj = gated_json(raw, max_bytes)
    except MalformedJson as exc:
        raise RuleError(str(exc)) from None
    text = text.strip()
    size = len(text.encode("utf-8"))
    if size > MAX_RULE_BYTES:
        raise RuleError(f"a rule of {size} bytes is larger than {MAX_RULE_BYTES} bytes")
    if not isinstance(obj, dict):
        raise RuleError(f"a rule must be a JSON object, got {json_type(obj)}")
    state = _enum(obj, "ruleState", RuleState)
    if state is RuleState.CONTROL:
        control = _enum(obj, "controlType", ControlType)
        rule_id = _integer(obj, "ruleId") if obj.get("ruleId") is not None else None
        return Rule(rule_id, state, control_type=control, raw=text)
    rule_id = _integer(obj, "ruleId")
    if state is RuleState.DELETE:
        return Rule(rule_id, state, raw=text)
    aggregate_field = _require(obj, "aggregateFieldName")
    if not isinstance(aggregate_field, str) or not aggregate_field:
        raise RuleError("'aggregateFieldName' must be a non-empty string")
    return Rule(
        rule_id=rule_id,
        state=state,
        grouping_key_names=_grouping_key_names(obj),
        aggregate_field=aggregate_field,
        aggregator=_enum(obj, "aggregatorFunctionType", Aggregator),
        operator=_operator(obj),
        limit=_limit(obj),
        window_ms=_window_ms(obj),
        raw=text,
    )


def rule_json(rule: Rule) -> dict[str, Any]:
    """The rule as last received, as plain JSON data (floats as Python floats) for listing;
    `rule.raw` is the exact received text (what EXPORT_RULES_CURRENT publishes)."""
    return json.loads(rule.raw)
