"""One user's pending join state between micro-batches, and the bytes it is stored as.

Apart from the join's steps (joiner.py) because its layout is a stored format: every
version must read what an older one wrote into a checkpoint (format 1 is still read), and it
is written as plain tuples, never these classes, so that moving or renaming them cannot break
a restore. The classes are plain data; what moves records between them is joiner.py's.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field

from spark_jobs.samples.core.records import Engagement, Source, View

_FORMAT = 2  # version of the to_bytes layout (1: without markers, still read)


@dataclass(slots=True)
class PendingEngagement:
    """An engagement waiting for its view; view_seen: its view was known while it waited;
    target_ts: the ts of the view its view_id names, as far as known (None: none known)."""

    engagement: Engagement
    view_seen: bool = False
    target_ts: int | None = None


@dataclass(frozen=True, slots=True)
class Marker:
    """A view_id this user sent as a duplicate: its first arrival's (user, post, ts), and the
    watermark at which it is forgotten (the duplicate's ts + window)."""

    user_id: int
    post_id: int
    ts: int
    until: int


@dataclass(slots=True)
class UserJoinState:
    """Pending views by view_id (kept without their raw text), pending engagements in
    arrival order, and markers of duplicate views by view_id (one per first arrival).
    window_ms is the window of the last step, so that next_wakeup needs no parameters (the
    KeyState protocol)."""

    window_ms: int = 0
    views: dict[str, View] = field(default_factory=dict)
    engagements: list[PendingEngagement] = field(default_factory=list)
    markers: dict[str, list[Marker]] = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not self.views and not self.engagements and not self.markers

    def pending_size(self) -> tuple[int, int]:
        """(pending views, pending engagements), for state-size metrics."""
        return len(self.views), len(self.engagements)

    def next_wakeup(self) -> int | None:
        """The earliest watermark at which advance() emits something; None when empty."""
        times = [v.ts + self.window_ms for v in self.views.values()]
        times.extend(p.engagement.ts + self.window_ms for p in self.engagements)
        times.extend(m.until for marks in self.markers.values() for m in marks)
        return min(times) if times else None

    def to_bytes(self) -> bytes:
        """Plain tuples, not the classes, so stored state survives refactoring. Every
        touched user's state is encoded and decoded once per micro-batch: both are single
        comprehensions over flat tuples."""
        views = [
            (v.view_id, v.user_id, v.post_id, v.ts, v.context,
             s.topic, s.partition, s.offset, s.kafka_timestamp, s.key)
            for v in self.views.values()
            for s in (v.source,)
        ]
        engagements = [
            (e.user_id, e.post_id, e.view_id, e.signal, e.ts, e.raw,
             s.topic, s.partition, s.offset, s.kafka_timestamp, s.key,
             p.view_seen, p.target_ts)
            for p in self.engagements
            for e in (p.engagement,)
            for s in (e.source,)
        ]
        markers = [(view_id, m.user_id, m.post_id, m.ts, m.until)
                   for view_id, marks in self.markers.items() for m in marks]
        return pickle.dumps((_FORMAT, self.window_ms, views, engagements, markers), protocol=5)

    @classmethod
    def from_bytes(cls, data: bytes) -> UserJoinState:
        version, window_ms, views, engagements, *rest = pickle.loads(data)
        if version not in (1, _FORMAT):
            raise ValueError(f"unknown training_samples state format {version}")
        state = cls(window_ms)
        for view_id, *marker in rest[0] if rest else ():
            state.markers.setdefault(view_id, []).append(Marker(*marker))
        state.views = {
            view_id: View(view_id, user_id, post_id, ts, context, Source(*src))
            for view_id, user_id, post_id, ts, context, *src in views}
        if version == _FORMAT:
            state.engagements = [
                PendingEngagement(Engagement(user_id, post_id, view_id, signal, ts, raw,
                                             Source(topic, partition, offset, at, key)),
                                  view_seen, target_ts)
                for (user_id, post_id, view_id, signal, ts, raw,
                     topic, partition, offset, at, key, view_seen, target_ts) in engagements]
            return state
        for user_id, post_id, view_id, signal, ts, raw, *src in engagements:  # format 1
            view_seen = src.pop()
            engagement = Engagement(user_id, post_id, view_id, signal, ts, raw, Source(*src))
            target_ts = state.views[view_id].ts if view_id in state.views else None
            state.engagements.append(PendingEngagement(engagement, view_seen, target_ts))
        return state
