"""View de-duplication by view_id across users (CONTRACTS.md section 9, last bullet): the pure
rule (core/dedup.py) and how the per-user join takes the views it drops."""

from __future__ import annotations

import itertools
import pickle

import pytest

from spark_jobs.samples.core.dedup import DuplicateView, FirstArrival, dedup_views
from spark_jobs.samples.core.join_state import Marker
from spark_jobs.samples.core.joiner import (
    JoinParameters,
    UserJoinState,
    add_records,
    advance,
)
from spark_jobs.samples.core.records import Engagement, Source, View

TTL = 1_000
W = 100
PARAMS = JoinParameters(W, ("like", "share"))
_offsets = itertools.count()


def view(view_id: str, ts: int, user: int = 1, post: int = 7, *, kts: int = 0,
         partition: int = 0) -> View:
    source = Source("views", partition, next(_offsets), kts, str(user))
    return View(view_id, user, post, ts, "{}", source, f"{view_id}@{source.offset}")


def eng(signal: str, ts: int, view_id: str | None, user: int = 1, post: int = 7) -> Engagement:
    offset = next(_offsets)
    source = Source("engagements", 0, offset, 0, str(user))
    return Engagement(user, post, view_id, signal, ts, f"{signal}@{offset}", source)


def kinds(judged) -> list[tuple[str, int, int | None]]:
    """(kind, view ts, first arrival's user) per judged view, in arrival order."""
    return [("dup", j.view.ts, j.first_user_id) if isinstance(j, DuplicateView)
            else ("view", j.ts, None) for j in judged]


# -- the pure rule ----------------------------------------------------------------------------
def test_first_arrival_is_kept_and_later_ones_within_the_ttl_are_duplicates():
    first, judged = dedup_views(None, [view("v", 100, user=1), view("v", 100, user=2),
                                       view("v", 50, user=3)], 0, TTL)
    assert kinds(judged) == [("view", 100, None), ("dup", 100, 1), ("dup", 50, 1)]
    assert first == FirstArrival(100, 1, 7, TTL)
    assert (judged[1].first_post_id, judged[1].first_ts) == (7, 100)
    assert judged[1].source == judged[1].view.source


def test_the_first_arrival_is_remembered_across_batches_and_users():
    first, _ = dedup_views(None, [view("v", 100, user=1, post=7)], 0, TTL)
    first, judged = dedup_views(first, [view("v", 600, user=2, post=9)], 500, TTL)
    assert kinds(judged) == [("dup", 600, 1)]
    assert (judged[0].first_user_id, judged[0].first_post_id) == (1, 7)
    assert first.ts == 100


def test_arrival_order_is_kafka_timestamp_then_partition_then_offset():
    a = view("v", 10, user=1, kts=5, partition=1)
    b = view("v", 10, user=2, kts=3, partition=0)
    c = view("v", 10, user=3, kts=3, partition=1)
    _, judged = dedup_views(None, [a, c, b], 0, TTL)
    assert [(type(j).__name__, j.source) for j in judged] == [
        ("View", b.source), ("DuplicateView", c.source), ("DuplicateView", a.source)]


def test_at_or_beyond_the_ttl_is_a_new_first_arrival():
    first, judged = dedup_views(None, [view("v", 0), view("v", TTL - 1), view("v", TTL),
                                       view("v", 2 * TTL - 1)], 0, TTL)
    assert kinds(judged) == [("view", 0, None), ("dup", TTL - 1, 1), ("view", TTL, None),
                             ("dup", 2 * TTL - 1, 1)]
    assert first.ts == TTL


def test_late_views_pass_untouched_and_are_not_remembered():
    first, judged = dedup_views(None, [view("v", 40), view("v", 60)], 50, TTL)
    assert kinds(judged) == [("view", 40, None), ("view", 60, None)]
    assert first.ts == 60


def test_the_first_arrival_is_forgotten_at_its_ts_plus_ttl():
    first = FirstArrival(100, 1, 7, TTL)
    assert first.next_wakeup() == 100 + TTL
    kept, judged = dedup_views(first, [view("v", 100 + TTL, user=2)], 100 + TTL, TTL)
    assert kinds(judged) == [("view", 100 + TTL, None)] and kept.user_id == 2
    kept, judged = dedup_views(first, [view("v", 100 + TTL - 1, user=2)], 100 + TTL - 1, TTL)
    assert kinds(judged) == [("dup", 100 + TTL - 1, 1)] and kept == first
    assert dedup_views(first, [], 100 + TTL, TTL) == (None, [])


def test_state_round_trips_and_bad_input_is_refused():
    first = FirstArrival(5, 2, 3, TTL)
    assert FirstArrival.from_bytes(first.to_bytes()) == first and not first.is_empty()
    with pytest.raises(ValueError, match="format"):
        FirstArrival.from_bytes(pickle.dumps((9, 5, 2, 3, TTL)))
    with pytest.raises(ValueError, match="ttl_ms"):
        dedup_views(None, [], 0, 0)


# -- the join takes the duplicates ------------------------------------------------------------
def dup(v: View, first_user: int, first_post: int = 7, first_ts: int = 0) -> DuplicateView:
    return DuplicateView(v, first_user, first_post, first_ts)


def test_a_duplicate_is_counted_and_yields_no_sample():
    state = UserJoinState()
    result = add_records(state, [dup(view("v", 10, user=2), first_user=1)], 0, PARAMS)
    result.extend(advance(state, 10_000, PARAMS))
    assert result.duplicate_views == 1 and result.samples == []
    assert state.is_empty()


def test_engagements_naming_another_users_first_arrival_are_view_mismatch():
    before = eng("like", 15, "v", user=2)
    state = UserJoinState()
    add_records(state, [before], 0, PARAMS)
    result = add_records(state, [dup(view("v", 10, user=2), first_user=1),
                                 eng("share", 20, "v", user=2)], 5, PARAMS)
    assert sorted(d.reason for d in result.dead_letters) == ["view_mismatch", "view_mismatch"]
    assert state.markers == {"v": [Marker(1, 7, 0, 10 + W)]}
    assert state.next_wakeup() == 10 + W


def test_the_same_user_and_post_as_the_first_arrival_is_outside_window():
    """The first arrival's sample is out (else its view would be pending here): an engagement
    naming it now is past its window."""
    e = eng("like", 520, "v", user=1, post=7)
    state = UserJoinState()
    add_records(state, [e], 500, PARAMS)
    result = add_records(state, [dup(view("v", 510, user=1, post=7), first_user=1)], 500, PARAMS)
    assert result.dead_letters == []
    result = advance(state, 620, PARAMS)
    assert [(o.reason, o.engagement) for o in result.orphans] == [("outside_window", e)]
    assert state.is_empty()


def test_a_pending_view_of_the_id_governs_over_a_duplicate():
    state = UserJoinState()
    add_records(state, [view("v", 10, user=1, post=7)], 0, PARAMS)
    add_records(state, [dup(view("v", 12, user=1, post=8), first_user=1)], 0, PARAMS)
    result = add_records(state, [eng("like", 20, "v", user=1, post=8)], 0, PARAMS)
    assert [d.reason for d in result.dead_letters] == ["view_mismatch"]


def test_markers_expire_at_the_duplicates_ts_plus_window_and_round_trip():
    state = UserJoinState()
    add_records(state, [dup(view("v", 10, user=2), first_user=1),
                        dup(view("v", 30, user=2), first_user=1)], 0, PARAMS)
    assert [m.until for m in state.markers["v"]] == [30 + W]
    restored = UserJoinState.from_bytes(state.to_bytes())
    assert restored == state
    advance(restored, 30 + W - 1, PARAMS)
    assert "v" in restored.markers
    advance(restored, 30 + W, PARAMS)
    assert restored.is_empty() and restored.next_wakeup() is None


def test_state_of_the_previous_format_is_still_read():
    old = pickle.dumps((1, W, [("v", 1, 7, 10, "{}", "views", 0, 3, 0, "1")], []), protocol=5)
    state = UserJoinState.from_bytes(old)
    assert list(state.views) == ["v"] and state.markers == {}


def test_a_new_view_of_a_due_id_closes_the_old_one_first():
    """Beyond the TTL the de-duplication lets the id through again; the old view is due at
    this watermark but its timer fires after the batch's rows."""
    state = UserJoinState()
    add_records(state, [view("v", 0), eng("like", 5, "v")], 0, PARAMS)
    result = add_records(state, [view("v", 1_000), eng("share", 1_005, "v")], W, PARAMS)
    assert [(s.ts, dict(s.labels)) for s in result.samples] == [(0, {"like": 1, "share": 0})]
    assert result.duplicate_views == 0
    result = advance(state, 1_000 + W, PARAMS)
    assert [(s.ts, dict(s.labels)) for s in result.samples] == [(1_000, {"like": 0, "share": 1})]
