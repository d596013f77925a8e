"""Per-user per-hour capping of raw events (the seed's fix for spammers that stalled checkpoints).

The first `cap` critical events of a user in each clock hour of event time pass, duplicates
included, in topic offset order; the rest are dropped. Hour counters are forgotten once the
watermark passes the hour's end, since any record of that hour is then late.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field

from spark_jobs.experiments.core.tumbling_windows import hour_of

HOUR_MS = 3_600_000


@dataclass
class HourlyCap:
    """Accepted-event counters of one user, by clock hour."""

    cap: int
    counts: dict[int, int] = field(default_factory=dict)

    def admit(self, ts: int) -> bool:
        """Count the event if its hour still has room; False means it is capped."""
        hour = hour_of(ts)
        seen = self.counts.get(hour, 0)
        if seen >= self.cap:
            return False
        self.counts[hour] = seen + 1
        return True

    def expire(self, watermark_ms: int) -> None:
        """Forget hours that ended at or before the watermark."""
        for hour in [h for h in self.counts if (h + 1) * HOUR_MS <= watermark_ms]:
            del self.counts[hour]

    def next_wakeup(self) -> int | None:
        """Event time at which the oldest hour counter can be dropped."""
        return (min(self.counts) + 1) * HOUR_MS if self.counts else None

    def is_empty(self) -> bool:
        return not self.counts

    def to_bytes(self) -> bytes:
        return pickle.dumps(self.counts, protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def from_bytes(cls, cap: int, blob: bytes | None) -> HourlyCap:
        return cls(cap, pickle.loads(blob) if blob else {})
