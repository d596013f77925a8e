"""Rule management for people: `tideline rules add|pause|activate|delete|list`.

Rules reach the running job only through the `rules` topic, so every command writes there;
`list` replays that topic through the same engine the job runs (so it shows exactly what the
job holds, updates and deletes included) and adds the newest rows of `fraud_alerts`.
"""

from __future__ import annotations

import json
from typing import Any

from spark_jobs.contracts.tables import TABLE_FRAUD_ALERTS
from spark_jobs.contracts.topics import TOPIC_RULES
from spark_jobs.fraud.core.engine import FraudEngine, MemoryStore
from spark_jobs.fraud.core.rules import Rule, RuleError, RuleState, parse_rule
from spark_jobs.settings import Settings
from spark_jobs.streaming.kafka.producer import make_producer, produce_all
from spark_jobs.streaming.kafka.topic_admin import ensure_topics
from spark_jobs.streaming.kafka.topic_reader import read_all
from spark_jobs.streaming.lake.delta import read_arrow, table_exists


class RuleCommandError(ValueError):
    """A rule command that cannot be carried out; the message says why."""


def send_rule(settings: Settings, text: str) -> Rule:
    """Validate a rule (the job would reject it the same way) and publish it."""
    try:
        rule = parse_rule(text)
    except RuleError as exc:
        raise RuleCommandError(f"invalid rule: {exc}") from None
    ensure_topics(settings.kafka, (TOPIC_RULES,), settings.kafka.partitions)
    key = None if rule.rule_id is None else str(rule.rule_id)
    produce_all(make_producer(settings.kafka), TOPIC_RULES, [key], [text.strip()])
    return rule


def current_rules(settings: Settings) -> list[Rule]:
    """The ACTIVE and PAUSE rules the job holds after every message of the rules topic."""
    ensure_topics(settings.kafka, (TOPIC_RULES,), settings.kafka.partitions)
    engine = FraudEngine(MemoryStore())
    for message in read_all(settings.kafka, TOPIC_RULES):
        engine.on_rule(message.value, message.timestamp)
    return engine.rules()


def _find(settings: Settings, rule_id: int) -> Rule:
    for rule in current_rules(settings):
        if rule.rule_id == rule_id:
            return rule
    raise RuleCommandError(f"no current rule {rule_id} (see `tideline rules list`)")


def set_state(settings: Settings, rule_id: int, state: RuleState) -> Rule:
    """Pause or re-activate a rule: its definition as last received, with the new state."""
    definition = json.loads(_find(settings, rule_id).raw)
    definition["ruleState"] = state.value
    return send_rule(settings, json.dumps(definition))


def delete_rule(settings: Settings, rule_id: int) -> Rule:
    _find(settings, rule_id)
    return send_rule(settings, json.dumps({"ruleId": rule_id, "ruleState": "DELETE"}))


def recent_alerts(settings: Settings, limit: int) -> list[dict[str, Any]]:
    """The newest `limit` rows of fraud_alerts, newest first."""
    uri = settings.lake.table(TABLE_FRAUD_ALERTS)
    if not table_exists(uri):
        return []
    rows = read_arrow(uri, columns=["rule_id", "grouping_key", "aggregate", "limit",
                                    "transaction_id", "event_time", "alert_time"]).to_pylist()
    rows.sort(key=lambda r: (r["alert_time"], r["event_time"]), reverse=True)
    return rows[:limit]


def render_rules(rules: list[Rule]) -> str:
    if not rules:
        return "no current rules"
    lines = [f"{'rule':>6}  {'state':<6}  {'grouping key':<28}  {'aggregate':<32}  window"]
    for rule in rules:
        aggregate = (f"{rule.aggregator.value}({rule.aggregate_field}) "
                     f"{rule.operator.value} {rule.limit}")
        lines.append(f"{rule.rule_id:>6}  {rule.state.value:<6}  "
                     f"{','.join(rule.grouping_key_names):<28}  {aggregate:<32}  "
                     f"{rule.window_ms // 60_000} min")
    return "\n".join(lines)


def render_alerts(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "no alerts yet"
    lines = [f"{'rule':>6}  {'key':<36}  {'aggregate':>14}  {'limit':>10}  transaction"]
    for row in rows:
        lines.append(f"{row['rule_id']:>6}  {row['grouping_key']:<36}  {row['aggregate']:>14}  "
                     f"{row['limit']:>10}  {row['transaction_id']}")
    return "\n".join(lines)
