"""Views de-duplicated by view_id across users: the first arrival wins (CONTRACTS.md section 9,
last bullet). Pure: the Spark adapter keys this by view_id, ahead of the per-user join.

The rule, which is what the shadow recomputation applies too:
- "First" is arrival order: (Kafka timestamp, topic, partition, offset) among records read
  together. Across micro-batches the job's read order decides, which agrees unless a record
  with an earlier Kafka timestamp is read in a later micro-batch (a lagging partition, or a
  producer whose timestamps go backwards); Spark's offset log replays the same micro-batches,
  so the outcome is deterministic under replay.
- "Within samples.dedup_ttl of the first arrival" is event time: the first arrival F is
  remembered until the watermark passes F.ts + ttl, and a later arrival X is a duplicate of F
  iff X.ts < F.ts + ttl. Any X with X.ts < F.ts + ttl that comes once F was forgotten is behind
  the watermark, so the outcome never depends on when F was forgotten. An X with
  X.ts >= F.ts + ttl is a new view of the same id and becomes the first arrival in turn.
- A record behind the watermark is neither remembered nor judged: the join dead-letters it
  `late`, as every record behind the watermark.
- A duplicate keeps the first arrival's (user_id, post_id, ts), so that the duplicate's user, whose
  join never sees that view, can dead-letter engagements naming it (`view_mismatch`).
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable
from dataclasses import dataclass

from spark_jobs.samples.core.records import Source, View

_FORMAT = 1  # version of the to_bytes layout


@dataclass(frozen=True, slots=True)
class FirstArrival:
    """What is remembered of a view_id's first arrival; ttl_ms makes next_wakeup
    parameterless (the KeyState protocol)."""

    ts: int
    user_id: int
    post_id: int
    ttl_ms: int

    def is_empty(self) -> bool:
        return False

    def next_wakeup(self) -> int:
        """The watermark at which the first arrival is forgotten."""
        return self.ts + self.ttl_ms

    def to_bytes(self) -> bytes:
        return pickle.dumps((_FORMAT, self.ts, self.user_id, self.post_id, self.ttl_ms),
                            protocol=5)

    @classmethod
    def from_bytes(cls, data: bytes) -> FirstArrival:
        version, *fields = pickle.loads(data)
        if version != _FORMAT:
            raise ValueError(f"unknown view dedup state format {version}")
        return cls(*fields)


@dataclass(frozen=True, slots=True)
class DuplicateView:
    """A view dropped as a later arrival of an id already seen, with the first arrival's
    user, post and ts (what the id's engagements are checked against)."""

    view: View
    first_user_id: int
    first_post_id: int
    first_ts: int

    @property
    def source(self) -> Source:
        """The view's coordinates: ordered and dead-lettered like any other record."""
        return self.view.source


def arrival_order(view: View) -> tuple[int, str, int, int]:
    """(Kafka timestamp, topic, partition, offset): which of a view_id's records came first."""
    return (view.source.kafka_timestamp, *view.source.order)


def dedup_views(
    first: FirstArrival | None, views: Iterable[View], watermark_ms: int, ttl_ms: int
) -> tuple[FirstArrival | None, list[View | DuplicateView]]:
    """Judge one view_id's views of a micro-batch. Returns what to remember and, in arrival
    order, each view as it goes on: a View (a first arrival, or late: the join decides) or a
    DuplicateView."""
    if ttl_ms <= 0:
        raise ValueError(f"ttl_ms must be positive, got {ttl_ms}")
    if first is not None and first.next_wakeup() <= watermark_ms:
        first = None  # expired; its timer has not fired yet in this micro-batch
    out: list[View | DuplicateView] = []
    for view in sorted(views, key=arrival_order):
        if view.ts < watermark_ms:
            out.append(view)
        elif first is None or view.ts >= first.ts + ttl_ms:
            first = FirstArrival(view.ts, view.user_id, view.post_id, ttl_ms)
            out.append(view)
        else:
            out.append(DuplicateView(view, first.user_id, first.post_id, first.ts))
    return first, out
