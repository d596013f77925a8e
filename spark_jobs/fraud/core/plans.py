"""A rule prepared for evaluation: what the engine reads for every transaction, looked up once.

The engine runs every present rule for every transaction, so whatever follows from the rule
alone (its key builder, its comparison, whether its field is a COUNT_* one) is settled when
the rules change rather than per transaction. A COUNT_* field's window holds only ones, so
its aggregate follows from how many entries the window holds (aggregates.of_count), without
turning entries back into Decimals.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, NamedTuple

from spark_jobs.fraud.core.aggregates import (
    COUNT_FIELDS,
    Aggregator,
    comparator,
    field_value,
    of_count,
)
from spark_jobs.fraud.core.keys import key_builder
from spark_jobs.fraud.core.rules import Rule, RuleState
from spark_jobs.fraud.core.windows import Window


class RulePlan(NamedTuple):
    rule: Rule
    rule_id: int
    field: str
    names: tuple[str, ...]
    key_of: Callable[[Mapping[str, Any]], str]
    window_ms: int
    active: bool  # ACTIVE (alerts), else PAUSE (collects only)
    resets: bool  # COUNT_WITH_RESET_FLINK: the window is dropped when it fires
    counted: bool  # a COUNT_* field
    aggregator: Aggregator
    passes: Callable[[Decimal, Decimal], bool]  # aggregate <operator> limit
    limit: Decimal


def plan(rule: Rule) -> RulePlan:
    """The plan of a present (ACTIVE or PAUSE) rule."""
    assert rule.rule_id is not None
    return RulePlan(
        rule, rule.rule_id, rule.aggregate_field, rule.grouping_key_names,
        key_builder(rule.grouping_key_names), rule.window_ms,
        rule.state is RuleState.ACTIVE, rule.resets_on_fire,
        rule.aggregate_field in COUNT_FIELDS, rule.aggregator, comparator(rule.operator),
        rule.limit)


def field_values(fields: Mapping[str, Any], names: tuple[str, ...]
                 ) -> dict[str, Decimal | None]:
    """What one transaction contributes to each of the rules' fields (field_value)."""
    return {name: field_value(fields, name) for name in names}


def first_result(rule: RulePlan, value: Decimal) -> Decimal:
    """window_result of a window holding only the current transaction's value (a new
    window): what either window kind answers for one entry, without asking it."""
    if rule.counted:
        return of_count(rule.aggregator, 1)
    return rule.aggregator.of_values([value])


def window_result(rule: RulePlan, window: Window, event_time: int) -> Decimal | None:
    """The rule's aggregate over its window ending at event_time (None: no value in it)."""
    if rule.counted:
        count = window.count_in(event_time, rule.window_ms)
        return of_count(rule.aggregator, count) if count else None
    return window.aggregate(rule.aggregator, event_time, rule.window_ms)
