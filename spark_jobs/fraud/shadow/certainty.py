"""Which of a replay's (rule, transaction) evaluations the job's micro-batches cannot change.

The engine applies inputs in arrival order whatever the batches, but the watermark it is given
comes from the batches, and it decides two things (engine.py):

- whether a transaction is late: a late one is not evaluated (with `alert_on_late_events` it
  is, over windows the clean-up may already have trimmed);
- which window entries the clean-up has dropped: never one that an on-time transaction needs,
  unless the rule's window was widened after the drop (its state is kept).

So an evaluation is certain when its transaction is at or above the watermark bound
(watermark.py) and its window starts at or after what a widening may have lost. Every other
evaluation is left out of the comparison, on both sides. (Through a COUNT_WITH_RESET_FLINK
rule an uncertain evaluation also decides whether the key's window was cleared: the replay
then follows what the job did, recompute.py.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from spark_jobs.fraud.core.keys import Transaction
from spark_jobs.fraud.core.rules import ControlType, Rule, RuleState

_CLEARS_ALL = (ControlType.CLEAR_STATE_ALL, ControlType.DELETE_RULES_ALL)


class Certainty:
    """Follows a replay's rule messages; judges its transactions."""

    def __init__(self, bucket_ms: int) -> None:
        self.bucket_ms = max(bucket_ms, 0)
        self._narrowest: dict[int, int] = {}  # rule -> narrowest window since its state began
        self._kept_from: dict[int, int] = {}  # rule -> entries before this may have been dropped

    def _floor(self, event_time: int) -> int:
        return event_time - event_time % self.bucket_ms if self.bucket_ms else event_time

    def on_rule(self, message: Rule | None, before: Mapping[int, Rule],
                after: Mapping[int, Rule], watermark_bound: int) -> None:
        """A rules message was applied: `before` and `after` are the present rules by id."""
        if message is not None and message.control_type in _CLEARS_ALL:
            self._narrowest.clear()  # every window is gone, here and in the job
            self._kept_from.clear()
        for rule_id in before.keys() | after.keys():
            old, new = before.get(rule_id), after.get(rule_id)
            if new is None or old is None or (old.grouping_key_names, old.value_source) != (
                    new.grouping_key_names, new.value_source):
                self._narrowest.pop(rule_id, None)  # the engine starts it empty
                self._kept_from.pop(rule_id, None)
                if new is not None:
                    self._narrowest[rule_id] = new.window_ms
                continue
            narrowest = self._narrowest.setdefault(rule_id, old.window_ms)
            if new.window_ms > old.window_ms:  # sees what was kept under the narrowest width
                lost = watermark_bound - narrowest
                self._kept_from[rule_id] = max(self._kept_from.get(rule_id, lost), lost)
            self._narrowest[rule_id] = min(narrowest, new.window_ms)

    def judge(self, transaction: Transaction, rules: Sequence[Rule],
              watermark_bound: int) -> dict[int, bool]:
        """For each ACTIVE rule (the ones that may alert): is its evaluation certain?"""
        on_time = transaction.event_time >= watermark_bound
        verdicts: dict[int, bool] = {}
        for rule in rules:
            if rule.state is not RuleState.ACTIVE or rule.rule_id is None:
                continue
            kept_from = self._kept_from.get(rule.rule_id)
            verdicts[rule.rule_id] = on_time and (
                kept_from is None
                or self._floor(transaction.event_time - rule.window_ms) >= self._floor(kept_from)
            )
        return verdicts
