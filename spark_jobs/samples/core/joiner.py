"""One user's view/engagement join: the two pure steps that move its pending records.

`add_records` takes a micro-batch of parsed records (any order) at the current watermark;
`advance` closes what the watermark has passed. Both mutate a UserJoinState (join_state.py)
and return what they emitted; neither does I/O, so the Spark adapter keeps the state as one
blob per user (streaming/blob_state.py) with its timer at `next_wakeup()`.

Semantics (CONTRACTS.md section 8 and the lead's decisions):
- A view closes when watermark >= ts + window and yields its sample then, once. An
  engagement takes part only when view ts <= its ts < view ts + window.
- An explicit view_id attaches only to that view. A null view_id attaches at the close of v
  iff v is the latest known view of its (user, post) with ts <= engagement ts (ties: later
  (topic, partition, offset)). Since records are never behind the watermark, every view that
  could outrank v is known by then: it has ts <= engagement ts < v.ts + window, so it arrived
  before v closed. An engagement waiting for a later pending view is therefore never taken by
  an earlier one.
- An engagement still pending at watermark >= ts + window is an orphan: `outside_window` if
  the view it belongs to was seen (it closed while the engagement waited, or is pending with
  a later ts), else `no_view`.
- Views close in (ts, topic, partition, offset) order, then orphans are emitted.
- A view whose id is pending is dropped as a duplicate (the batch is ordered by Kafka
  coordinates first, so the first arrival wins). Emitted views are forgotten at once: a
  re-delivery is behind the watermark and dead-lettered `late`; likewise an engagement that
  only arrives after its view was emitted cannot learn of it and ends `no_view`.
- Across users and after emission, views are de-duplicated upstream (core/dedup.py): a
  DuplicateView is counted and leaves a marker with its first arrival's (user, post, ts)
  until watermark >= its ts + window. An explicit view_id names, among the pending view and
  the markers of the id, the latest at or before the engagement, else the earliest (first
  arrivals of one id are a TTL apart); a marker's of another user or post is
  `view_mismatch`, one's of the same is a view whose window is over (`outside_window`).
- An explicit view_id naming a pending view (or a marker) of another post (or user) is
  dead-lettered `view_mismatch`, whichever of the two arrived first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Container, Iterable
from dataclasses import dataclass

from spark_jobs.samples.core.dedup import DuplicateView
from spark_jobs.samples.core.join_state import Marker, PendingEngagement, UserJoinState
from spark_jobs.samples.core.outputs import (
    LATE,
    NO_VIEW,
    OUTSIDE_WINDOW,
    VIEW_MISMATCH,
    DeadLetter,
    Orphan,
    Sample,
    StepResult,
    make_sample,
)
from spark_jobs.samples.core.records import UNKNOWN_SIGNAL, Engagement, Rejected, View

__all__ = [
    "DeadLetter",
    "JoinParameters",
    "Orphan",
    "Sample",
    "StepResult",
    "UserJoinState",
    "add_records",
    "advance",
]

@dataclass(frozen=True, slots=True)
class JoinParameters:
    """The attribution window and the configured signals (label order)."""

    window_ms: int
    signals: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.window_ms <= 0:
            raise ValueError(f"window_ms must be positive, got {self.window_ms}")
        if len(set(self.signals)) != len(self.signals):
            raise ValueError(f"signals must be distinct, got {self.signals}")


def _view_order(view: View) -> tuple[int, str, int, int]:
    return (view.ts, *view.source.order)


def _engagement_order(pending: PendingEngagement) -> tuple[int, str, int, int]:
    return (pending.engagement.ts, *pending.engagement.source.order)


def _same_target(engagement: Engagement, view: View | Marker) -> bool:
    return engagement.user_id == view.user_id and engagement.post_id == view.post_id


# -- arrivals ------------------------------------------------------------------------------
def add_records(
    state: UserJoinState,
    records: Iterable[View | DuplicateView | Engagement | Rejected],
    watermark_ms: int,
    params: JoinParameters,
) -> StepResult:
    """Take one batch of parsed records. Emits dead letters and the duplicate count, and the
    sample of a due view whose id arrives again as a new view (a record that is not late
    cannot be due yet: call advance for the same watermark)."""
    state.window_ms = params.window_ms
    result = StepResult()
    views: list[View | DuplicateView] = []
    engagements: list[Engagement] = []
    for record in sorted(records, key=lambda r: r.source.order):
        if isinstance(record, View | DuplicateView):
            views.append(record)
        elif isinstance(record, Engagement):
            engagements.append(record)
        elif isinstance(record, Rejected):
            result.dead_letters.append(
                DeadLetter(record.reason, record.raw, record.source, record.detail))
        else:
            raise TypeError(f"not a samples record: {record!r}")
    # the view_ids pending engagements name (views never add engagements: the set can only
    # be a superset while the views are added), so that a view no engagement names skips
    # the scan of the pending engagements
    named = {p.engagement.view_id for p in state.engagements}
    for view in views:
        if isinstance(view, DuplicateView):
            _add_duplicate(state, view, params, result, named)
        else:
            _add_view(state, view, watermark_ms, params, result, named)
    for engagement in engagements:
        _add_engagement(state, engagement, watermark_ms, params, result)
    return result


def _add_view(state: UserJoinState, view: View, watermark_ms: int, params: JoinParameters,
              result: StepResult, named: Container[str | None]) -> None:
    if view.ts < watermark_ms:
        result.dead_letters.append(DeadLetter(LATE, view.raw, view.source))
        return
    pending = state.views.get(view.view_id)
    if pending is not None:
        if pending.ts + params.window_ms > watermark_ms:
            result.duplicate_views += 1
            return
        # due, and its timer fires after these rows: this is the id's next view (the
        # de-duplication let it through), so the pending one closes first, as advance would
        _close(state, [pending], params, result)
    state.views[view.view_id] = View(view.view_id, view.user_id, view.post_id, view.ts,
                                     view.context, view.source)  # kept without its raw text
    if view.view_id in named:
        _retarget_pending(state, view.view_id, view, result)


def _add_duplicate(
    state: UserJoinState, duplicate: DuplicateView, params: JoinParameters, result: StepResult,
    named: Container[str | None],
) -> None:
    """Count it and remember whose view the id is (one marker per first arrival)."""
    result.duplicate_views += 1
    view = duplicate.view
    until = view.ts + params.window_ms
    marks = state.markers.setdefault(view.view_id, [])
    for i, old in enumerate(marks):
        if old.ts == duplicate.first_ts:
            marks[i] = dataclasses.replace(old, until=max(old.until, until))
            return
    marker = Marker(duplicate.first_user_id, duplicate.first_post_id, duplicate.first_ts, until)
    marks.append(marker)
    if view.view_id in named:
        _retarget_pending(state, view.view_id, marker, result)


def _takes_over(new_ts: int, old_ts: int | None, at: int) -> bool:
    """Whether a view of the id at new_ts, rather than old_ts, is the one an engagement at
    `at` names: the latest at or before it, else the earliest."""
    if old_ts is None:
        return True
    if new_ts <= at:
        return old_ts > at or new_ts > old_ts
    return old_ts > at and new_ts < old_ts


def _target(state: UserJoinState, engagement: Engagement) -> View | Marker | None:
    """The view (or a marker's first arrival) the engagement's view_id names, if known."""
    target: View | Marker | None = None
    view_id = engagement.view_id
    for known in (state.views.get(view_id), *state.markers.get(view_id, ())):
        if known is not None and (
                target is None or _takes_over(known.ts, target.ts, engagement.ts)):
            target = known
    return target


def _retarget_pending(
    state: UserJoinState, view_id: str, target: View | Marker, result: StepResult
) -> None:
    """A view (or marker) of view_id is now known: the pending engagements it becomes the
    target of are dead-lettered if of another user or post; if it is a marker's, their view
    was seen (its window is over)."""
    if not any(p.engagement.view_id == view_id for p in state.engagements):
        return
    kept = []
    for pending in state.engagements:
        e = pending.engagement
        if e.view_id != view_id or not _takes_over(target.ts, pending.target_ts, e.ts):
            kept.append(pending)
        elif not _same_target(e, target):
            result.dead_letters.append(DeadLetter(VIEW_MISMATCH, e.raw, e.source))
        else:
            pending.target_ts = target.ts
            pending.view_seen = pending.view_seen or isinstance(target, Marker)
            kept.append(pending)
    state.engagements = kept


def _add_engagement(
    state: UserJoinState,
    engagement: Engagement,
    watermark_ms: int,
    params: JoinParameters,
    result: StepResult,
) -> None:
    reason = None
    if engagement.signal not in params.signals:
        reason = UNKNOWN_SIGNAL  # the parser rejects these already; kept for direct callers
    elif engagement.ts < watermark_ms:
        reason = LATE
    target = None if engagement.view_id is None else _target(state, engagement)
    if reason is None and target is not None and not _same_target(engagement, target):
        reason = VIEW_MISMATCH
    if reason is None:
        state.engagements.append(PendingEngagement(
            engagement, isinstance(target, Marker), None if target is None else target.ts))
    else:
        result.dead_letters.append(DeadLetter(reason, engagement.raw, engagement.source))


# -- watermark -----------------------------------------------------------------------------
def advance(state: UserJoinState, watermark_ms: int, params: JoinParameters) -> StepResult:
    """Close every view with ts + window <= watermark (its sample), then orphan every
    engagement with ts + window <= watermark that no view took."""
    state.window_ms = window = params.window_ms
    result = StepResult()
    closing = sorted(
        (v for v in state.views.values() if v.ts + window <= watermark_ms), key=_view_order
    )
    if closing:
        _close(state, closing, params, result)
    due: list[PendingEngagement] = []
    waiting: list[PendingEngagement] = []
    for pending in state.engagements:
        (due if pending.engagement.ts + window <= watermark_ms else waiting).append(pending)
    if due:
        state.engagements = waiting
        for pending in sorted(due, key=_engagement_order):
            e = pending.engagement
            seen = pending.view_seen or (e.view_id is not None and e.view_id in state.views)
            result.orphans.append(Orphan(e, OUTSIDE_WINDOW if seen else NO_VIEW))
    if state.markers:
        kept = {k: [m for m in marks if m.until > watermark_ms]
                for k, marks in state.markers.items()}
        state.markers = {k: marks for k, marks in kept.items() if marks}
    return result


def _close(
    state: UserJoinState, closing: list[View], params: JoinParameters, result: StepResult
) -> None:
    window = params.window_ms
    by_view_id: dict[str, list[PendingEngagement]] = {}
    by_post: dict[tuple[int, int], list[PendingEngagement]] = {}
    for pending in state.engagements:
        e = pending.engagement
        if e.view_id is None:
            by_post.setdefault((e.user_id, e.post_id), []).append(pending)
        else:
            by_view_id.setdefault(e.view_id, []).append(pending)
    # The known view that follows each view of its (user, post) in (ts, coordinates) order:
    # v is the latest view at or before t iff that successor is missing or later than t.
    successor: dict[str, View | None] = {}
    last: dict[tuple[int, int], View] = {}
    for view in sorted(state.views.values(), key=_view_order):
        before = last.get((view.user_id, view.post_id))
        if before is not None:
            successor[before.view_id] = view
        successor[view.view_id] = None
        last[(view.user_id, view.post_id)] = view
    attached: set[int] = set()
    for view in closing:
        end = view.ts + window
        seen: set[str] = set()
        for pending in by_view_id.get(view.view_id, ()):
            e = pending.engagement
            if not _same_target(e, view):
                continue  # dead-lettered on arrival; unreachable
            if view.ts <= e.ts < end:
                seen.add(e.signal)
                attached.add(id(pending))
            else:
                pending.view_seen = True
        after = successor[view.view_id]
        for pending in by_post.get((view.user_id, view.post_id), ()):
            e = pending.engagement
            if e.ts < view.ts or id(pending) in attached:
                continue
            if e.ts < end and (after is None or after.ts > e.ts):
                seen.add(e.signal)
                attached.add(id(pending))
            else:  # outside this view's window, or a later view is its latest
                pending.view_seen = True
        result.samples.append(make_sample(view, params.signals, seen))
        del state.views[view.view_id]
    if attached:
        state.engagements = [p for p in state.engagements if id(p) not in attached]
