"""Which of a replay's (rule, transaction) evaluations the job's micro-batches cannot change.

The engine applies inputs in arrival order whatever the batches, but the watermark it is given
comes from the batches, and it decides two things (engine.py):

- whether a transaction is late: a late one is not evaluated (with `alert_on_late_events` it
  is, over windows the clean-up may already have trimmed);
- which window entries are gone (the retention rule, retention.py): never one that an on-time
  transaction needs, unless the rule's window was widened, which sees what the old width had
  kept at the watermark of the widening;
- whether a transaction is beyond the late retention (a `late` dead letter): the replay
  follows the job's dead letters there (recompute.py).

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

    def __init__(self, bucket_ms: int, late_retention_ms: int) -> None:
        self.bucket_ms = max(bucket_ms, 0)
        self.late_retention_ms = max(late_retention_ms, 0)
        self._kept_from: dict[int, int] = {}  # rule -> entries before this may have been dropped

    def _floor(self, event_time: int) -> int:
        return event_time - event_time % self.bucket_ms if self.bucket_ms else event_time

    def on_rule(self, message: Rule | None, before: Mapping[int, Rule],
                after: Mapping[int, Rule], watermark_bound: int) -> None:
        """A rules message was applied: `before` and `after` are the present rules by id."""
        if message is not None and message.control_type in _CLEARS_ALL:
            self._kept_from.clear()  # every window is gone, here and in the job
        for rule_id in before.keys() | after.keys():
            old, new = before.get(rule_id), after.get(rule_id)
            if new is None or old is None or not new.keeps_state_of(old):
                self._kept_from.pop(rule_id, None)  # the engine starts it empty
            elif new.window_ms > old.window_ms:  # sees what the old width kept: the job's
                # watermark at the widening is at most the bound, so it lost at most this
                lost = watermark_bound - self.late_retention_ms - old.window_ms
                self._kept_from[rule_id] = max(self._kept_from.get(rule_id, lost), lost)

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
