"""The alerts the contract expects: every rules and transactions message through the pure engine.

Messages are merged in the contract's arrival order with the job's own key (`arrival_order`:
Kafka time, a rule first on ties, then topic, partition, offset) and applied one at a time to
one engine with the job's `fraud.bucket`. Each transaction gets the highest watermark the job
can have applied to it (watermark.py), so the engine evaluates exactly the transactions that
were on time in the job for certain; the others are late here whatever
`fraud.alert_on_late_events` says, since their alerts are left out anyway (certainty.py). The
replay never runs the clean-up, so it forgets no transaction id (a redelivery counts once, as
the contract says) and keeps every window entry a certain evaluation may need.

One thing an uncertain evaluation changes for later ones: whether a COUNT_WITH_RESET_FLINK
rule fired and cleared its key's window. There the replay follows the job's record (its
alerts, `job_fired`): it clears the window when the job's rule fired, and keeps it when only
the replay's did. Likewise whether a transaction was beyond `fraud.late_retention` (a `late`
dead letter that enters no window) depends on the job's watermark: where the bound says it
may have been, the replay follows the job's dead letters (`job_late`), admitting the
transaction unless the job dead-lettered it. Alerts come out in the `fraud_alerts` row shape,
through the job's own `output_fields`.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from spark_jobs.contracts.topics import TOPIC_RULES, TOPIC_TRANSACTIONS
from spark_jobs.fraud.core.aggregates import field_value
from spark_jobs.fraud.core.engine import FraudEngine, MemoryStore
from spark_jobs.fraud.core.keys import (
    Transaction,
    TransactionError,
    grouping_key,
    parse_transaction,
)
from spark_jobs.fraud.core.output_rows import (
    KIND_RULE,
    KIND_TRANSACTION,
    arrival_order,
    output_fields,
)
from spark_jobs.fraud.core.rules import Rule, RuleError, parse_rule
from spark_jobs.fraud.core.windows import window_loader
from spark_jobs.fraud.jobs.engine_host import DRIVER_SHARD, InputRow
from spark_jobs.fraud.shadow.certainty import Certainty
from spark_jobs.fraud.shadow.watermark import watermark_bounds
from spark_jobs.settings import FraudSettings
from spark_jobs.streaming.kafka.topic_reader import Message

ALERT_FIELDS = ("rule_id", "transaction_id", "grouping_key", "aggregate", "limit",
                "event_time", "topic", "partition", "offset")
# (rule_id, topic, partition, offset): one rule's evaluation of one transaction message
Evaluation = tuple[int, str, int, int]
Where = tuple[str, int, int]  # (topic, partition, offset) of one message


@dataclass
class Replay:
    """What the replay found: the certain alerts (ALERT_FIELDS rows), and the evaluations it
    cannot vouch for with their transaction's eventTime (alerts or not, on either side)."""

    alerts: list[dict[str, Any]] = field(default_factory=list)
    undecidable: dict[Evaluation, int] = field(default_factory=dict)
    rules: int = 0
    transactions: int = 0


def input_rows(rules: Iterable[Message], transactions: Iterable[Message]) -> list[InputRow]:
    """Both topics' messages as the job's rows, in the contract's arrival order."""
    rows = [
        InputRow(kind, m.value, topic, m.partition, m.offset, m.timestamp,
                 None if m.key is None else bytes(m.key).decode("utf-8", errors="replace"))
        for kind, topic, messages in ((KIND_RULE, TOPIC_RULES, rules),
                                      (KIND_TRANSACTION, TOPIC_TRANSACTIONS, transactions))
        for m in messages
    ]
    return sorted(rows, key=arrival_order)


def _present(engine: FraudEngine) -> dict[int, Rule]:
    return {rule.rule_id: rule for rule in engine.rules() if rule.rule_id is not None}


def _parsed_rule(raw: bytes | str | None) -> Rule | None:
    try:
        return parse_rule(raw)
    except RuleError:
        return None


def _hold_uncertain_resets(engine: FraudEngine, transaction: Transaction, rules: list[Rule],
                           verdicts: dict[int, bool]) -> dict[int, tuple[Rule, str, Any]]:
    """Per resetting rule whose evaluation is uncertain: the rule, the transaction's key and a
    copy of its window before the transaction."""
    held = {}
    for rule in rules:
        if rule.rule_id is None or not rule.resets_on_fire or verdicts.get(rule.rule_id, True):
            continue
        key = grouping_key(transaction.fields, rule.grouping_key_names)
        held[rule.rule_id] = (rule, key, copy.deepcopy(engine.store.get_window(rule.rule_id, key)))
    return held


def _follow_job_resets(engine: FraudEngine, transaction: Transaction,
                       held: dict[int, tuple[Rule, str, Any]], fired: Collection[int],
                       job_fired: Collection[Evaluation], where: tuple[str, int, int]) -> None:
    """Make each uncertain resetting evaluation end as the job's did (`held`: see above)."""
    for rule_id, (rule, key, before) in held.items():
        in_job, here = (rule_id, *where) in job_fired, rule_id in fired
        if in_job and not here:
            engine.store.delete_window(rule_id, key)
        elif here and not in_job:
            window = window_loader(engine.bucket_ms)(before)
            value = field_value(transaction.fields, rule.aggregate_field)
            if value is not None:
                window.add(transaction.event_time, value)
            engine.store.put_window(rule_id, key, window.state())


def _admitting_watermark(transaction: Transaction | None, bound: int, retention_ms: int,
                         where: Where, job_late: Collection[Where]) -> int:
    """The watermark to apply a transaction at: the bound, or, where the bound would put it
    beyond the late retention and the job did not dead-letter it as late, the highest
    watermark that admits it (the job's was at most that)."""
    if transaction is None or transaction.event_time >= bound - retention_ms or where in job_late:
        return bound
    return transaction.event_time + retention_ms


def replay(rows: Sequence[InputRow], fraud: FraudSettings,
           job_fired: Collection[Evaluation] = (), job_late: Collection[Where] = ()) -> Replay:
    """Apply rows (in arrival order) to a fresh engine; see the module docstring. job_late:
    the transactions the job sent to dead_letters as late."""
    retention = fraud.late_retention_ms
    engine = FraudEngine(MemoryStore(), alert_on_late=False, bucket_ms=fraud.bucket_ms,
                         late_retention_ms=retention)
    certainty = Certainty(fraud.bucket_ms, retention)
    found = Replay()
    for row, bound in zip(rows, watermark_bounds(rows, fraud.lateness_ms), strict=True):
        if row.kind == KIND_RULE:
            before = _present(engine)
            engine.on_rule(row.value, row.kafka_timestamp, bound)
            certainty.on_rule(_parsed_rule(row.value), before, _present(engine), bound)
            found.rules += 1
            continue
        found.transactions += 1
        try:
            transaction = parse_transaction(row.value)
        except TransactionError:
            transaction = None  # a dead letter: no state, no alert
        where = (row.kafka_topic, row.kafka_partition, row.kafka_offset)
        watermark = _admitting_watermark(transaction, bound, retention, where, job_late)
        if transaction is None or transaction.event_time < watermark - retention \
                or engine.store.is_seen(transaction.id_key):  # no evaluation
            engine.on_transaction(row.value, watermark, row.kafka_timestamp)
            continue
        rules = engine.rules()
        verdicts = certainty.judge(transaction, rules, bound)
        held = _hold_uncertain_resets(engine, transaction, rules, verdicts)
        outputs = engine.on_transaction(row.value, watermark, row.kafka_timestamp)
        alerts = [output_fields(DRIVER_SHARD, o, row) for o in outputs if o.kind == "alert"]
        _follow_job_resets(engine, transaction, held, {a["rule_id"] for a in alerts}, job_fired,
                           where)
        for rule_id, certain in verdicts.items():
            if not certain:
                found.undecidable[(rule_id, *where)] = transaction.event_time
        found.alerts += [{name: a[name] for name in ALERT_FIELDS} for a in alerts
                         if verdicts.get(a["rule_id"], False)]
    return found
