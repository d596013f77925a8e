"""The fraud engine: one shard's ordered stream of rules and transactions, one at a time.

This is the seed's DynamicAlertFunction without Flink: `on_rule` is processBroadcastElement,
`on_transaction` is processElement (store the value, aggregate the window ending at the
transaction, compare, alert), `cleanup` is onTimer. The Spark job feeds inputs in the
contract's arrival order; because each input is applied completely before the next, a
transaction never sees later arrivals and micro-batch boundaries change nothing.

State is kept per (rule, key) even where two rules share a key, which makes the contract's
per-rule semantics (a rule sees only what arrived while it was present, DELETE and
COUNT_WITH_RESET_FLINK clear only that rule's state) direct, at the price of storing a value
once per rule; only the rule's value is kept, not the whole transaction.

Retention is the contract's, exact whatever the clean-up timing (retention.py): a window
entry lives until the watermark passes eventTime + window + late retention (floored to the
bucket in bucket mode), so a transaction up to the late retention behind the watermark is
evaluated over a complete window and enters the windows, and one further behind is a `late`
dead letter. A window is trimmed whenever its key sees a transaction, and `cleanup` (a scan
of every window, to run on a timer) catches the keys that went idle. A transaction id is
remembered until its transaction is beyond the late retention: a redelivery that could still
enter a window is recognised, and an older one is a late dead letter anyway.
"""

from __future__ import annotations

import functools
from collections import Counter
from decimal import Decimal
from sys import intern
from typing import Any

from spark_jobs.contracts.json_gate import DEFAULT_MAX_MESSAGE_BYTES
from spark_jobs.contracts.reasons import DUPLICATE, MALFORMED
from spark_jobs.fraud.core.aggregates import Aggregator
from spark_jobs.fraud.core.cleanup import CleanupSchedule
from spark_jobs.fraud.core.keys import (
    Transaction,
    TransactionError,
    lenient_text,
    parse_transaction,
)
from spark_jobs.fraud.core.outputs import (
    Output,
    alert,
    current_rule,
    dead_letter,
    dropped,
    rule_error,
)
from spark_jobs.fraud.core.plans import RulePlan, field_values, first_result, plan, window_result
from spark_jobs.fraud.core.retention import DEFAULT_LATE_RETENTION_MS, Retention
from spark_jobs.fraud.core.rules import ControlType, Rule, RuleError, RuleState, parse_rule
from spark_jobs.fraud.core.store import MemoryStore, WindowStore
from spark_jobs.fraud.core.windows import MISSED, ExactWindow, window_loader, window_starter
from spark_jobs.streaming.lake.dead_letters import LATE

__all__ = ["FraudEngine", "MemoryStore", "Output", "WindowStore"]

# Meta entries of the store (the clean-up's own: cleanup.py).
RULES = "rules"  # {rule_id: (raw text as last received, arrival ms)}
BUCKET_MS = "bucket_ms"  # the mode the stored windows were written in


@functools.lru_cache(maxsize=4096)
def _stored_rule(raw: str) -> Rule:
    """Rules are kept as their received text; parsing them again is cached, so loading an
    engine per micro-batch costs no re-validation."""
    return parse_rule(raw)


class FraudEngine:
    """Applies rules and transactions of one shard, in arrival order, to a WindowStore.

    alert_on_late: evaluate transactions behind the watermark too (within the late retention).
    bucket_ms: 0 for exact windows, else the pre-aggregation resolution.
    late_retention_ms: `fraud.late_retention`: entries are kept this much longer than their
    rule's window, so transactions up to this far behind the watermark enter the windows and
    see complete ones; further behind they are `late` dead letters.
    max_message_bytes: jobs.max_message_bytes, the JSON gate's size bound for every message.
    """

    def __init__(
        self,
        store: WindowStore,
        alert_on_late: bool = False,
        bucket_ms: int = 0,
        *,
        late_retention_ms: int = DEFAULT_LATE_RETENTION_MS,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        self.store = store
        self.max_message_bytes = max_message_bytes
        self.alert_on_late = alert_on_late
        self.bucket_ms = max(bucket_ms, 0)
        self._span = max(self.bucket_ms, 1)
        self.retention = Retention(store, late_retention_ms)
        self._retention = self.retention.ms
        self._watermark: int | None = None  # the newest watermark this engine was given
        self._load_window = window_loader(self.bucket_ms)
        self._start_window = window_starter(self.bucket_ms)
        self.counters: Counter[str] = Counter()
        stored_mode = store.get_meta(BUCKET_MS)
        if stored_mode != self.bucket_ms:
            if stored_mode is not None:  # windows written in another mode cannot be read
                store.clear_windows()
            store.put_meta(BUCKET_MS, self.bucket_ms)
        self._records: dict[int, tuple[str, int]] = dict(store.get_meta(RULES) or {})
        self._schedule = CleanupSchedule(store, self.retention, self._load_window)
        self._refresh_rules()

    # -- rules ---------------------------------------------------------------------------
    def _refresh_rules(self) -> None:
        rules: dict[int, Rule] = {}
        for rule_id, (raw, _arrival) in self._records.items():
            try:
                rules[rule_id] = _stored_rule(raw)
            except RuleError:  # accepted by an older version, invalid now: leave it out
                self.counters["stored_rules_invalid"] += 1
        self._rules = rules
        self._ordered = [rules[rule_id] for rule_id in sorted(rules)]
        self._plans = [plan(rule) for rule in self._ordered]
        self._fields = tuple({rule.aggregate_field: None for rule in self._ordered})

    def _save_rules(self) -> None:
        self.store.put_meta(RULES, dict(self._records))
        self._refresh_rules()

    def recover(self) -> None:
        """Go on from what the store holds after one message's processing raised (see
        isolation.py): the rules as last saved, and a full clean-up scan at the next timer
        (the in-memory clean-up index may have missed a change)."""
        self._records = dict(self.store.get_meta(RULES) or {})
        self.retention.reload()
        self._schedule.reload()
        self._refresh_rules()
        self._schedule.rescan()

    def caught_up(self, windows: set[tuple[int, str]]) -> None:
        """The store was brought forward by replaying changes another engine made (the spark
        mode's copies of a shard): read its rules and clocks again, and index the `windows`
        the replay put for clean-up (a rule change since: clean up by a full scan)."""
        records = dict(self.store.get_meta(RULES) or {})
        self.retention.reload()  # a widening the other engine applied
        self._schedule.reload()
        if records != self._records:
            self._records = records
            self._refresh_rules()
            self._schedule.dues = None
        self._schedule.index(windows, self._rules)

    def rules(self) -> list[Rule]:
        """The current (ACTIVE and PAUSE) rules in ruleId order."""
        return list(self._ordered)

    def _at(self, watermark_ms: int | None) -> int | None:
        """Note the watermark an input is applied at; None: the newest one given before."""
        if watermark_ms is not None and (self._watermark is None or watermark_ms > self._watermark):
            self._watermark = watermark_ms
        return self._watermark

    def on_rule(
        self, raw: bytes | str | None, arrival_ms: int, watermark_ms: int | None = None
    ) -> list[Output]:
        """Apply one `rules` message; an invalid one yields a rule_error and changes nothing.
        watermark_ms: the watermark it is applied at (what a widened window can still see);
        None for the newest one this engine was given."""
        watermark_ms = self._at(watermark_ms)
        try:
            rule = parse_rule(raw, self.max_message_bytes)
        except RuleError as exc:
            self.counters["rule_errors"] += 1
            return [rule_error(lenient_text(raw).strip(), str(exc))]
        self.counters["rules"] += 1
        if rule.state is RuleState.CONTROL:
            return self._control(rule)
        assert rule.rule_id is not None  # parse_rule requires it outside CONTROL
        old = self._rules.get(rule.rule_id)
        if rule.state is RuleState.DELETE:
            if rule.rule_id in self._records:
                del self._records[rule.rule_id]
                self.store.delete_rule_windows(rule.rule_id)
                self.retention.forget(rule.rule_id)
                self._save_rules()
                self._schedule.rescan()
            return []
        if old is not None and not rule.keeps_state_of(old):
            self.store.delete_rule_windows(rule.rule_id)
            self.retention.forget(rule.rule_id)
        elif old is not None:
            self.retention.updated(old, rule, watermark_ms)
        self._records[rule.rule_id] = (rule.raw, arrival_ms)
        self._save_rules()
        if old is not None:  # a narrower window lets entries go sooner
            self._schedule.rescan()
        return []

    def _control(self, rule: Rule) -> list[Output]:
        if rule.control_type is ControlType.EXPORT_RULES_CURRENT:
            return [current_rule(r) for r in self._ordered]
        self.store.clear_windows()
        self.retention.forget()
        if rule.control_type is ControlType.DELETE_RULES_ALL:
            self._records.clear()
            self._save_rules()
            self._schedule.rescan()
        return []

    # -- transactions --------------------------------------------------------------------
    def on_transaction(
        self, raw: bytes | str | None, watermark_ms: int, now_ms: int
    ) -> list[Output]:
        """Apply one `transactions` message: store its value in the window of every present
        rule and key, and alert for each ACTIVE rule whose window aggregate passes the limit.
        Never raises for bad input: an unusable message yields a dead_letter, and so does one
        beyond the late retention (reason `late`, checked first: it enters nothing)."""
        self._at(watermark_ms)
        try:
            transaction = parse_transaction(raw, self.max_message_bytes)
        except TransactionError as exc:
            self.counters["dead_letters"] += 1
            return [dead_letter(MALFORMED, lenient_text(raw), str(exc))]
        event_time = transaction.event_time
        if not self.retention.admits(event_time, watermark_ms):
            self.counters["dead_letters"] += 1
            self.counters["beyond_retention"] += 1
            return [dead_letter(LATE, transaction.text,
                                "behind the watermark by more than fraud.late_retention")]
        id_key = transaction.id_key
        if self.store.is_seen(id_key):
            self.counters["duplicates"] += 1
            return [dropped(DUPLICATE)]
        self.store.put_seen(id_key, event_time)
        self.counters["transactions"] += 1
        self._schedule.expires_at(event_time + self._retention + 1)  # when its id may be forgotten
        if not self._ordered:
            return []
        late = event_time < watermark_ms
        if late:
            self.counters["late"] += 1
        entry_end = event_time - event_time % self._span + self._span
        evaluate = self.alert_on_late or not late
        return self._apply(transaction, evaluate, entry_end, watermark_ms, now_ms)

    def _apply(self, transaction: Transaction, evaluate: bool, entry_end: int,
               watermark_ms: int, now_ms: int) -> list[Output]:
        store, fields, event_time = self.store, transaction.fields, transaction.event_time
        get_window, put_window, load = store.get_window, store.put_window, self._load_window
        put_appended = store.put_appended
        earliest, retention_ms = self.retention.earliest, self._retention
        # the oldest window end still evaluated: one for every rule unless one was widened
        floor = None if self.retention.widened else watermark_ms - retention_ms
        schedule = self._schedule
        outputs: list[Output] = []
        keys: dict[tuple[str, ...], str] = {}
        # field -> its value's text, one string for every window of this transaction, and
        # interned: equal amounts of different transactions share it too (most of the state
        # held is these texts otherwise; BENCHMARKS.md)
        texts: dict[str, str] = {}
        firsts: dict[tuple[str, Aggregator], Decimal] = {}  # a new window's aggregate
        # field -> a new window's stored state: an exact one is an immutable pair, one for
        # every new window of this transaction (bucket mode's lists are changed in place)
        starts: dict[str, Any] | None = {} if self.bucket_ms == 0 else None
        start = self._start_window
        values = field_values(fields, self._fields)
        for rule in self._plans:
            value = values[rule.field]
            alerting = evaluate and rule.active
            if value is None and not alerting:
                continue
            key = keys.get(rule.names)
            if key is None:
                key = keys[rule.names] = rule.key_of(fields)
            rule_id, window_ms = rule.rule_id, rule.window_ms
            if value is not None:  # an entry for the rule's window of the key
                text = texts.get(rule.field)
                if text is None:
                    text = texts[rule.field] = intern(str(value))
                due = entry_end + window_ms + retention_ms
                if schedule.next_ms is None or due < schedule.next_ms:
                    schedule.expires_at(due)
            state = get_window(rule_id, key)
            if state is None:  # a new key: most (rule, key) pairs see one transaction
                if value is None:
                    continue  # an empty window does not alert
                # the window starts with this one entry, so its aggregate is the value's own
                # (plans.first_result, the same for every rule with this field and function)
                if schedule.dues is not None:
                    schedule.dues.push(due, rule_id, key)
                if alerting:
                    result = firsts.get((rule.field, rule.aggregator))
                    if result is None:
                        result = firsts[rule.field, rule.aggregator] = first_result(rule, value)
                    if rule.passes(result, rule.limit) and self._fire(
                            outputs, rule, key, result, transaction, now_ms):
                        continue
                if starts is None:
                    put_window(rule_id, key, start(event_time, text))
                    continue
                stored = starts.get(rule.field)
                if stored is None:
                    stored = starts[rule.field] = start(event_time, text)
                put_window(rule_id, key, stored)
                continue
            if value is not None and type(state) is ExactWindow:  # the repeat path, in one call
                oldest = earliest(rule_id, window_ms, watermark_ms) if floor is None else floor
                result = state.append_aggregate(
                    event_time, value, text, oldest - window_ms, window_ms,
                    rule.aggregator if alerting else None, rule.counted)
                if result is not MISSED:
                    # logged before anything else can raise: a message that fails is
                    # isolated (isolation.py), and the store keeps the entry appended
                    put_appended(rule_id, key, state)
                    if alerting and rule.passes(result, rule.limit):
                        self._fire(outputs, rule, key, result, transaction, now_ms)
                    continue
            window = load(state)
            # trim as we go, so that cleanup() mostly has idle keys left to visit
            trimmed = window.expire(
                earliest(rule_id, window_ms, watermark_ms) if floor is None else floor, window_ms)
            if value is not None:
                dues = schedule.dues
                first_end = window.first_end() if dues is not None else None
                window.add(event_time, value, text)
                if dues is not None and (first_end is None or entry_end < first_end):
                    dues.push(due, rule_id, key)
            if alerting:
                result = window_result(rule, window, event_time)
                if result is not None and rule.passes(result, rule.limit) and self._fire(
                        outputs, rule, key, result, transaction, now_ms):
                    continue
            if value is not None or trimmed:
                if len(window):
                    put_window(rule_id, key, window.state())
                else:
                    store.delete_window(rule_id, key)
        return outputs

    def _fire(self, outputs: list[Output], rule: RulePlan, key: str, result: Decimal,
              transaction: Transaction, now_ms: int) -> bool:
        """Emit the alert of an aggregate that passed the limit; True when the rule drops the
        key's window on firing (COUNT_WITH_RESET_FLINK), which is done here."""
        outputs.append(alert(rule.rule, key, result, transaction, now_ms))
        self.counters["alerts"] += 1
        if rule.resets:
            self.store.delete_window(rule.rule_id, key)
        return rule.resets

    # -- clean-up ------------------------------------------------------------------------
    def cleanup(self, watermark_ms: int) -> None:
        """Drop what the retention rule lets go (the seed's onTimer): window entries past
        eventTime + rule window + late retention, windows of rules that are gone, and the ids
        of transactions beyond the late retention (a late dead letter's, were they redelivered)."""
        self._at(watermark_ms)
        self._schedule.run(watermark_ms, self._rules)

    def next_cleanup_ms(self, watermark_ms: int) -> int | None:
        """When cleanup should next run, as an event-time timer: the earliest watermark at
        which it would drop something, rounded up to the second like the seed's timers, and
        always after watermark_ms (a cleanup already due is due at the next second).
        None when there is nothing to clean."""
        return self._schedule.next_cleanup_ms(watermark_ms)
