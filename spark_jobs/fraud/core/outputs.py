"""What the engine emits: alerts, rule errors, exported rules and dead letters.

Each Output carries the exact message text for its topic and the same content as Python
data (numbers as Decimal) for tables and tests. Alerts embed the transaction's received text
as `triggeringEvent`, so the event is published exactly as received (field order and number
text included) without a re-serialisation.

Outputs echo their inputs, and an input can be hostile (CONTRACTS section 9). Every echo is
bounded, so that no output is ever refused by a producer or broker (~1 MB) for its size:
- an alert's triggeringEvent is the received text up to MAX_ECHO_BYTES (64 KiB of UTF-8);
  a larger transaction is echoed in the truncated form `{"transactionId": ..., "eventTime":
  ..., <the rule's grouping fields>..., "truncated": true, "receivedBytes": <size>}`, each
  field kept as received when its JSON text is at most MAX_FIELD_BYTES (else left out);
- an alert that is still larger than MAX_OUTPUT_BYTES (a huge grouping value, transactionId
  or aggregate) cannot be published: the transaction becomes an `error` dead letter saying so;
- a rule error echoes the rule's text up to MAX_ECHO_BYTES (`"truncated": true,
  "receivedBytes": <size>` added when cut) and the error up to MAX_DETAIL_CHARS;
- current_rules echo a rule as received, and rules are at most rules.MAX_RULE_BYTES.
Text that reaches an output is also encodable: lone surrogates (possible only in text given
as a Python str) are replaced.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Literal, NamedTuple

from spark_jobs.contracts.reasons import ERROR
from spark_jobs.fraud.core.keys import Transaction, json_text
from spark_jobs.fraud.core.rules import Rule

OutputKind = Literal["alert", "rule_error", "current_rule", "dead_letter", "dropped"]

MAX_ECHO_BYTES = 64 * 1024  # of a received message echoed in an output
MAX_FIELD_BYTES = 1024  # of one field kept in a truncated triggeringEvent
MAX_OUTPUT_BYTES = 256 * 1024  # of an alert (key and value): a quarter of a broker's limit
MAX_DETAIL_CHARS = 2_000  # of an error or dead-letter detail


class Output(NamedTuple):
    """One message: kind says the topic/table (alerts, rule_errors, current_rules, dead
    letters), value is the JSON text to publish (a dead letter's value is the received text),
    data the same content as Python data. A tuple: made at half the cost of a frozen
    dataclass, for every alert."""

    kind: OutputKind
    value: str
    data: Mapping[str, Any]


def json_string(text: str) -> str:
    """json.dumps(text, ensure_ascii=False): a grouping key in every alert, nearly always
    printable text without quotes or backslashes, which JSON writes as it is."""
    if text.isprintable() and '"' not in text and "\\" not in text:
        return '"' + text + '"'
    return json.dumps(text, ensure_ascii=False)


def number_text(number: Decimal) -> str:
    """A Decimal as a JSON number: its received text when it has one (see keys.JsonDecimal).
    str() of a finite Decimal is always valid JSON number syntax (e.g. 22.0, 1E+5)."""
    return getattr(number, "text", None) or str(number)


def utf8_size(text: str, limit: int) -> int:
    """The UTF-8 size of `text`, exact when it may exceed `limit` (no encoding when the text
    is too short to: the common case)."""
    if 4 * len(text) <= limit:
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def encodable(text: str) -> str:
    """`text` with any lone surrogate replaced, so that it encodes as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def cut(text: str, max_bytes: int) -> str:
    """At most `max_bytes` of `text` as UTF-8, never splitting a character; encodable."""
    if utf8_size(text, max_bytes) <= max_bytes:
        return encodable(text)
    return text.encode("utf-8", "replace")[:max_bytes].decode("utf-8", "ignore")


def truncated_event(transaction: Transaction, rule: Rule, received: int) -> str:
    """The triggeringEvent of a transaction too large to echo (see the module docstring)."""
    kept: dict[str, str] = {}
    for name in ("transactionId", "eventTime", *rule.grouping_key_names):
        if name in transaction.fields and name not in kept:
            text = json_text(transaction.fields[name])
            if utf8_size(text, MAX_FIELD_BYTES) <= MAX_FIELD_BYTES:
                kept[name] = text
    kept.pop("truncated", None)
    kept.pop("receivedBytes", None)
    fields = [f"{json.dumps(name, ensure_ascii=False)}:{text}" for name, text in kept.items()]
    return "{" + ",".join([*fields, '"truncated":true', f'"receivedBytes":{received}']) + "}"


def alert(
    rule: Rule, key: str, aggregate: Decimal, transaction: Transaction, alert_time_ms: int
) -> Output:
    """The `alerts` message of one firing; a dead letter when even its truncated form would be
    too large to publish (see the module docstring)."""
    event = transaction.text
    received = utf8_size(event, MAX_ECHO_BYTES)
    if received > MAX_ECHO_BYTES:
        event = truncated_event(transaction, rule, received)
    value = (
        f'{{"ruleId":{rule.rule_id},"groupingKey":{json_string(key)},'
        f'"aggregate":{number_text(aggregate)},"limit":{number_text(rule.limit)},'
        f'"triggeringEvent":{event},"alertTime":{alert_time_ms}}}'
    )
    size = utf8_size(value, MAX_OUTPUT_BYTES) + len(transaction.id_key)
    if size > MAX_OUTPUT_BYTES:
        return dead_letter(ERROR, transaction.text, (
            f"the alert of rule {rule.rule_id} would be {size} bytes, more than "
            f"{MAX_OUTPUT_BYTES}: its groupingKey, transactionId or aggregate is too large"))
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
    """The `rule_errors` message for an invalid rule (its text cut to MAX_ECHO_BYTES, or
    shorter when escaping it in JSON would make the message larger than MAX_OUTPUT_BYTES)."""
    received = utf8_size(raw_text, MAX_ECHO_BYTES)
    limit = MAX_ECHO_BYTES
    while True:
        data: dict[str, Any] = {"rule": cut(raw_text, limit),
                                "error": encodable(error[:MAX_DETAIL_CHARS])}
        if received > limit:
            data.update(truncated=True, receivedBytes=received)
        value = json.dumps(data, ensure_ascii=False)
        if utf8_size(value, MAX_OUTPUT_BYTES) <= MAX_OUTPUT_BYTES:
            return Output("rule_error", value, data)
        limit //= 2


def current_rule(rule: Rule) -> Output:
    """One `current_rules` message of EXPORT_RULES_CURRENT: the rule as last received."""
    return Output("current_rule", rule.raw, {"ruleId": rule.rule_id, "rule": rule.raw})


def dead_letter(reason: str, raw_text: str, detail: str) -> Output:
    """A message that cannot be used: the reason code (contracts.reasons), what is wrong, and
    its text cut to MAX_ECHO_BYTES (the sink keeps the received bytes, read back by offset)."""
    raw = cut(raw_text, MAX_ECHO_BYTES)
    return Output("dead_letter", raw, {"reason": reason, "detail":
                                       encodable(detail[:MAX_DETAIL_CHARS]), "raw": raw})


def dropped(reason: str) -> Output:
    """A message left out by design (a redelivered transaction: `duplicate`), for the counts."""
    return Output("dropped", "", {"reason": reason})
