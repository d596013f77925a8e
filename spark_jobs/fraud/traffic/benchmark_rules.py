"""Ten benchmark rules of the public Flink demo's form over the generated fields (CONTRACTS.md
section 7), sized so that together they fire for a few per cent of transactions."""

from __future__ import annotations

import json
from typing import Any


def _rule(rule_id: int, keys: list[str], field_name: str, function: str, operator: str,
          limit: float | int, minutes: int) -> dict[str, Any]:
    return {"ruleId": rule_id, "ruleState": "ACTIVE", "groupingKeyNames": keys,
            "aggregateFieldName": field_name, "aggregatorFunctionType": function,
            "limitOperatorType": operator, "limit": limit, "windowMinutes": minutes}


BENCHMARK_RULES: tuple[dict[str, Any], ...] = (
    # big-ticket payments: the rule that fires most often, the bulk of the latency samples
    _rule(1, ["payeeId"], "paymentAmount", "MAX", "GREATER", 500, 1),
    # spend per payee over the last 10 minutes
    _rule(2, ["payeeId"], "paymentAmount", "SUM", "GREATER", 2000, 10),
    # repeated high spend to one beneficiary within the hour
    _rule(3, ["payeeId", "beneficiaryId"], "paymentAmount", "SUM", "GREATER", 5000, 60),
    # velocity: many payments from one payee within a minute
    _rule(4, ["payeeId"], "COUNT_FLINK", "SUM", "GREATER", 30, 1),
    # a beneficiary collecting from many payments within 5 minutes
    _rule(5, ["beneficiaryId"], "COUNT_FLINK", "SUM", "GREATER_EQUAL", 400, 5),
    # unusually large average received within 30 minutes
    _rule(6, ["beneficiaryId"], "paymentAmount", "AVG", "GREATER", 500, 30),
    # the same pair paying again and again within 15 minutes
    _rule(7, ["payeeId", "beneficiaryId"], "COUNT_FLINK", "SUM", ">=", 12, 15),
    # cash: large cash amounts per payee within 20 minutes
    _rule(8, ["payeeId", "paymentType"], "paymentAmount", "SUM", ">", 1500, 20),
    # smallest payment of a pair within 45 minutes unusually high (card testing in reverse)
    _rule(9, ["payeeId", "beneficiaryId"], "paymentAmount", "MIN", ">", 1000, 45),
    # bursts to one beneficiary counted and reset on every alert (COUNT_WITH_RESET_FLINK)
    _rule(10, ["beneficiaryId"], "COUNT_WITH_RESET_FLINK", "SUM", ">=", 200, 2),
)


def benchmark_rules(n: int = 10) -> list[str]:
    """The first n benchmark rules as `rules` messages (JSON text), n <= 10."""
    if not 0 <= n <= len(BENCHMARK_RULES):
        raise ValueError(f"n must be between 0 and {len(BENCHMARK_RULES)}, got {n}")
    return [json.dumps(rule) for rule in BENCHMARK_RULES[:n]]
