"""What the fraud contract says the alerts of a run are: the pure engine over every message
in arrival order (Kafka time, a rule first on ties). Valid as the expected output of any run
whose event time rises with arrival, so that nothing is late whatever the micro-batches."""

from __future__ import annotations

import json

from spark_jobs.fraud.core.engine import FraudEngine, MemoryStore

Alert = tuple[int, str, str, str]  # (ruleId, groupingKey, transactionId, aggregate)


def reference_alerts(rules: list[tuple[int, dict]], transactions: list[tuple[int, dict]]
                     ) -> list[Alert]:
    """The alerts of (Kafka timestamp, message) rules and transactions, sorted."""
    engine = FraudEngine(MemoryStore())
    found = []
    arrivals = [(t, 0, m) for t, m in rules] + [(t, 1, m) for t, m in transactions]
    for at, _, message in sorted(arrivals, key=lambda x: (x[0], x[1])):
        is_rule = message.get("ruleState") is not None
        outputs = (engine.on_rule(json.dumps(message), at) if is_rule
                   else engine.on_transaction(json.dumps(message), -(2**62), at))
        found += [(o.data["ruleId"], o.data["groupingKey"],
                   str(o.data["triggeringEvent"]["transactionId"]), str(o.data["aggregate"]))
                  for o in outputs if o.kind == "alert"]
    return sorted(found)
