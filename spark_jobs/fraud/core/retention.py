"""How long a key's window entries live (CONTRACTS.md section 7, retention).

An entry of a rule's window is kept until the watermark passes `eventTime + windowMinutes +
fraud.late_retention`, the width being the rule's at that moment. So a transaction up to the
late retention behind the watermark finds every entry of its window still there, and enters
the windows; one further behind could not, and is a late dead letter that enters nothing.

The rule is exact, not "at the latest": an entry is gone the moment the watermark passes its
end, whenever the clean-up runs. While a rule's width is unchanged that needs nothing kept:
an evaluation that is admitted ends at or after watermark - retention, so its window never
reaches an entry that has passed its end. A widened window does reach back; what it may see
there is what the old width had not dropped, i.e. entries at or after the rule's *horizon*:
the highest `watermark - retention - width` of its earlier widths, noted at each widening
(with the watermark of that moment). The horizon is a few numbers per widened rule, in the
store's meta, and is dropped with the rule's windows (DELETE, a new key or field, CLEAR).
"""

from __future__ import annotations

from spark_jobs.fraud.core.rules import Rule
from spark_jobs.fraud.core.store import WindowStore

HORIZONS = "horizons"  # meta: {rule_id: entries before this event time are gone}
DEFAULT_LATE_RETENTION_MS = 3_600_000  # fraud.late_retention's default (fraud/settings.py)


class Retention:
    """The late retention and the horizons of widened rules, kept in a WindowStore's meta."""

    def __init__(self, store: WindowStore, late_retention_ms: int) -> None:
        self.store = store
        self.ms = max(late_retention_ms, 0)
        self._horizons: dict[int, int] = {}
        self.reload()

    def reload(self) -> None:
        """Read the horizons from the store again (it was changed by a replay)."""
        self._horizons = dict(self.store.get_meta(HORIZONS) or {})

    def admits(self, event_time: int, watermark_ms: int) -> bool:
        """Whether a transaction may still enter windows (at most the retention behind)."""
        return event_time >= watermark_ms - self.ms

    @property
    def widened(self) -> bool:
        """Whether any rule has a horizon (was widened): else `earliest` is the same for
        every rule, watermark - late retention."""
        return bool(self._horizons)

    def earliest(self, rule_id: int, window_ms: int, watermark_ms: int) -> int:
        """The `earliest_event_time` of Window.expire for this rule: the oldest end of a window
        still to be evaluated, or later when the rule's horizon cuts deeper."""
        earliest = watermark_ms - self.ms
        horizon = self._horizons.get(rule_id)
        if horizon is not None and horizon + window_ms > earliest:
            return horizon + window_ms
        return earliest

    def updated(self, old: Rule, new: Rule, watermark_ms: int | None) -> None:
        """A rule keeping its state changed from `old` to `new` at this watermark (None: none
        seen yet, so nothing can have been dropped): a widening notes the old width's cut."""
        if new.window_ms <= old.window_ms or watermark_ms is None or new.rule_id is None:
            return
        horizon = watermark_ms - self.ms - old.window_ms
        if horizon > self._horizons.get(new.rule_id, horizon - 1):
            self._horizons[new.rule_id] = horizon
            self.store.put_meta(HORIZONS, dict(self._horizons))

    def forget(self, rule_id: int | None = None) -> None:
        """The rule's windows (every rule's, for None) were dropped: so is its horizon."""
        if rule_id is None and self._horizons:
            self._horizons.clear()
        elif rule_id is None or self._horizons.pop(rule_id, None) is None:
            return
        self.store.put_meta(HORIZONS, dict(self._horizons))
