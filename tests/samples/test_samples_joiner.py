"""The training_samples join of one user: pure steps, no Spark (CONTRACTS.md section 8)."""

from __future__ import annotations

import itertools
import random

import pytest

from spark_jobs.samples.core.joiner import (
    DeadLetter,
    JoinParameters,
    Orphan,
    StepResult,
    UserJoinState,
    add_records,
    advance,
)
from spark_jobs.samples.core.records import (
    MALFORMED,
    Engagement,
    Rejected,
    Source,
    View,
)

W = 100
SIGNALS = ("like", "share", "skip")
PARAMS = JoinParameters(W, SIGNALS)
_offsets = itertools.count()


def view(view_id: str, ts: int, post: int = 7, *, user: int = 42, partition: int = 0,
         offset: int | None = None, context: str = "{}") -> View:
    offset = next(_offsets) if offset is None else offset
    source = Source("views", partition, offset, 0, str(user))
    return View(view_id, user, post, ts, context, source, f"view {view_id}@{offset}")


def eng(signal: str, ts: int, post: int = 7, view_id: str | None = None, *, user: int = 42,
        partition: int = 0) -> Engagement:
    offset = next(_offsets)
    source = Source("engagements", partition, offset, 0, str(user))
    return Engagement(user, post, view_id, signal, ts, f"{signal}@{offset}", source)


def labels(result: StepResult) -> dict[str, dict[str, int]]:
    return {s.view_id: dict(s.labels) for s in result.samples}


def reasons(items) -> list[tuple[str, str | None]]:
    """(reason, raw) of orphans or dead letters, in emitted order."""
    return [
        (x.reason, x.engagement.raw if isinstance(x, Orphan) else x.raw) for x in items
    ]


def run(records, *watermarks: int, start: int = 0) -> tuple[UserJoinState, StepResult]:
    """Add all records at `start`, then advance to each watermark; all outputs together."""
    state = UserJoinState()
    result = add_records(state, records, start, PARAMS)
    for wm in watermarks:
        result.extend(advance(state, wm, PARAMS))
    return state, result


ZERO = {"like": 0, "share": 0, "skip": 0}


# -- labels and samples ---------------------------------------------------------------------
def test_labels_one_per_signal_in_config_order_duplicates_once():
    v = view("v1", 1000, context='{"surface":"feed"}')
    records = [v, eng("skip", 1010, view_id="v1"), eng("like", 1020), eng("like", 1030)]
    state, result = run(records, 1100)
    [sample] = result.samples
    assert sample.labels == (("like", 1), ("share", 0), ("skip", 1))
    assert sample.as_dict() == {
        "sample_id": "v1", "view_id": "v1", "user_id": 42, "post_id": 7, "ts": 1000,
        "context": '{"surface":"feed"}', "labels": {"like": 1, "share": 0, "skip": 1},
    }
    assert list(sample.as_dict()["labels"]) == list(SIGNALS)
    assert sample.source == v.source
    assert result.orphans == [] and result.dead_letters == []
    assert state.is_empty()


def test_view_without_engagements_gets_zero_labels():
    _, result = run([view("v1", 0)], W)
    assert labels(result) == {"v1": ZERO}


def test_signal_not_configured_is_dead_lettered():
    e = eng("dislike", 10)
    _, result = run([view("v1", 0), e], W)
    assert reasons(result.dead_letters) == [("unknown_signal", e.raw)]
    assert labels(result) == {"v1": ZERO}


def test_rejected_records_become_dead_letters():
    source = Source("engagements", 2, 3, 4, None)
    _, result = run([Rejected(MALFORMED, "oops", source)])
    assert result.dead_letters == [DeadLetter(MALFORMED, "oops", source)]


# -- window edges -----------------------------------------------------------------------------
def test_window_is_inclusive_at_start_exclusive_at_end():
    first, last, after = eng("like", 1000), eng("share", 1099), eng("skip", 1100)
    state = UserJoinState()
    add_records(state, [view("v1", 1000), after, last, first], 1000, PARAMS)
    assert advance(state, 1099, PARAMS) == StepResult()
    result = advance(state, 1100, PARAMS)
    assert labels(result) == {"v1": {"like": 1, "share": 1, "skip": 0}}
    assert result.orphans == []
    assert state.pending_size() == (0, 1)
    result = advance(state, 1200, PARAMS)
    assert reasons(result.orphans) == [("outside_window", after.raw)]
    assert state.is_empty()


def test_explicit_view_id_outside_window_is_outside_window():
    late_like = eng("like", 1500, view_id="v1")
    _, result = run([view("v1", 1000), late_like], 1100, 1600)
    assert labels(result) == {"v1": ZERO}
    assert reasons(result.orphans) == [("outside_window", late_like.raw)]


def test_sample_is_emitted_once():
    state = UserJoinState()
    add_records(state, [view("v1", 0), eng("like", 5)], 0, PARAMS)
    assert len(advance(state, W, PARAMS).samples) == 1
    assert advance(state, W, PARAMS) == StepResult()
    assert advance(state, 10 * W, PARAMS) == StepResult()


# -- arrival order ----------------------------------------------------------------------------
def test_engagement_arriving_before_its_view_is_attached():
    state = UserJoinState()
    add_records(state, [eng("like", 30), eng("share", 40, view_id="v1")], 0, PARAMS)
    add_records(state, [view("v1", 20)], 10, PARAMS)
    result = advance(state, 120, PARAMS)
    assert labels(result) == {"v1": {"like": 1, "share": 1, "skip": 0}}
    assert state.is_empty()


def test_engagement_before_the_view_ts_is_outside_window():
    """Explicit view_id, ts before the view: orphaned at its own ts + window while the view
    is still pending."""
    early = eng("like", 10, view_id="v1")
    state = UserJoinState()
    add_records(state, [early], 0, PARAMS)
    add_records(state, [view("v1", 50)], 5, PARAMS)
    result = advance(state, 110, PARAMS)
    assert reasons(result.orphans) == [("outside_window", early.raw)]
    assert result.samples == []
    assert labels(advance(state, 150, PARAMS)) == {"v1": ZERO}


def test_null_engagement_before_any_view_is_no_view():
    early = eng("like", 10)
    _, result = run([early, view("v1", 50)], 110, 150)
    assert reasons(result.orphans) == [("no_view", early.raw)]
    assert labels(result) == {"v1": ZERO}


def test_records_in_any_order_within_a_batch():
    records = [view("v1", 0), eng("like", 5), eng("skip", 7, view_id="v1"), view("v2", 3, 8)]
    expected = run(records, W + 3)[1]
    for order in itertools.permutations(records):
        assert run(list(order), W + 3)[1] == expected


# -- duplicates -------------------------------------------------------------------------------
def test_redelivered_view_is_dropped_and_counted():
    state = UserJoinState()
    first = view("v1", 10, context='{"n":1}')
    result = add_records(state, [first, eng("like", 20)], 0, PARAMS)
    again = view("v1", 10, context='{"n":1}')
    result.extend(add_records(state, [again], 5, PARAMS))
    result.extend(advance(state, 110, PARAMS))
    assert result.duplicate_views == 1
    assert [s.context for s in result.samples] == ['{"n":1}']
    assert result.dead_letters == []


def test_first_arrival_by_offset_wins_within_a_batch():
    later = view("v1", 10, post=8, partition=0, offset=900, context='{"n":2}')
    first = view("v1", 12, post=7, partition=0, offset=800, context='{"n":1}')
    _, result = run([later, first], 200)
    assert [(s.post_id, s.ts, s.context) for s in result.samples] == [(7, 12, '{"n":1}')]
    assert result.duplicate_views == 1


def test_same_signal_twice_counts_once():
    _, result = run([view("v1", 0), eng("like", 1), eng("like", 1, view_id="v1")], W)
    assert labels(result) == {"v1": {"like": 1, "share": 0, "skip": 0}}
    assert result.orphans == []


def test_redelivery_after_emission_is_late():
    state = UserJoinState()
    add_records(state, [view("v1", 0)], 0, PARAMS)
    advance(state, W, PARAMS)
    again = view("v1", 0)
    result = add_records(state, [again], W, PARAMS)
    assert reasons(result.dead_letters) == [("late", again.raw)]
    assert result.duplicate_views == 0


# -- null view_id resolution ------------------------------------------------------------------
def test_null_view_id_tie_on_ts_goes_to_later_offset():
    a = view("a", 10, partition=0, offset=5)
    b = view("b", 10, partition=0, offset=6)
    _, result = run([b, a, eng("like", 15)], 110)
    assert labels(result) == {"a": ZERO, "b": {"like": 1, "share": 0, "skip": 0}}


def test_null_view_id_tie_later_partition_wins():
    a = view("a", 10, partition=1, offset=1)
    b = view("b", 10, partition=0, offset=50)
    _, result = run([a, b, eng("like", 15)], 110)
    assert labels(result)["a"]["like"] == 1 and labels(result)["b"]["like"] == 0


def test_engagement_waits_for_its_later_pending_view():
    state = UserJoinState()
    add_records(state, [view("early", 0), view("later", 50), eng("like", 60)], 0, PARAMS)
    result = advance(state, 100, PARAMS)
    assert labels(result) == {"early": ZERO}
    assert state.pending_size() == (1, 1)
    assert state.next_wakeup() == 150
    assert labels(advance(state, 150, PARAMS)) == {"later": {"like": 1, "share": 0, "skip": 0}}
    assert state.is_empty()


def test_null_engagement_goes_only_to_its_latest_view_even_outside_its_window():
    """e lies in the earlier view's window but its latest view is later than e: the earlier
    one takes it (latest at or before e); a view after e never does."""
    e = eng("like", 40)
    _, result = run([view("early", 0), view("after", 45), e], 100, 145)
    assert labels(result) == {"early": {"like": 1, "share": 0, "skip": 0}, "after": ZERO}


def test_null_engagement_outside_its_latest_view_window_is_outside_window():
    e = eng("like", 160)
    _, result = run([view("v1", 0), view("v2", 50), e], 100, 150, 260)
    assert labels(result) == {"v1": ZERO, "v2": ZERO}
    assert reasons(result.orphans) == [("outside_window", e.raw)]


def test_explicit_view_id_never_falls_back_to_another_view():
    e = eng("like", 20, view_id="later")
    _, result = run([view("early", 0), view("later", 50), e], 150)
    assert labels(result) == {"early": ZERO, "later": ZERO}
    assert reasons(result.orphans) == [("outside_window", e.raw)]


def test_null_view_id_matches_only_same_post():
    other = eng("like", 5, post=8)
    _, result = run([view("v1", 0, post=7), other], 105)
    assert labels(result) == {"v1": ZERO}
    assert reasons(result.orphans) == [("no_view", other.raw)]


# -- orphans ----------------------------------------------------------------------------------
def test_unknown_view_id_is_no_view():
    e = eng("like", 5, view_id="nope")
    state, result = run([view("v1", 0), e], 105)
    assert reasons(result.orphans) == [("no_view", e.raw)]
    assert state.is_empty()


def test_orphans_wait_for_their_own_ts_plus_window():
    e = eng("like", 30)
    state = UserJoinState()
    add_records(state, [e], 0, PARAMS)
    assert state.next_wakeup() == 130
    assert advance(state, 129, PARAMS) == StepResult()
    assert reasons(advance(state, 130, PARAMS).orphans) == [("no_view", e.raw)]
    assert state.is_empty() and state.next_wakeup() is None


def test_engagement_arriving_after_its_view_was_emitted_is_no_view():
    """Emitted views are forgotten: the join cannot tell such an engagement's view existed."""
    state = UserJoinState()
    add_records(state, [view("v1", 0)], 0, PARAMS)
    advance(state, W, PARAMS)
    e = eng("like", W + 10, view_id="v1")
    add_records(state, [e], W, PARAMS)
    assert reasons(advance(state, 2 * W + 10, PARAMS).orphans) == [("no_view", e.raw)]


# -- view_mismatch ----------------------------------------------------------------------------
def test_view_mismatch_when_engagement_arrives_after_view():
    e = eng("like", 5, post=8, view_id="v1")
    _, result = run([view("v1", 0, post=7), e], W)
    assert reasons(result.dead_letters) == [("view_mismatch", e.raw)]
    assert labels(result) == {"v1": ZERO} and result.orphans == []


def test_view_mismatch_when_view_arrives_after_engagement():
    e = eng("like", 5, post=8, view_id="v1")
    keep = eng("share", 6, post=7, view_id="v1")
    state = UserJoinState()
    assert add_records(state, [e, keep], 0, PARAMS) == StepResult()
    result = add_records(state, [view("v1", 0, post=7)], 0, PARAMS)
    assert reasons(result.dead_letters) == [("view_mismatch", e.raw)]
    assert labels(advance(state, W, PARAMS)) == {"v1": {"like": 0, "share": 1, "skip": 0}}


def test_view_mismatch_for_another_user_in_the_same_state():
    e = eng("like", 5, post=7, view_id="v1", user=43)
    _, result = run([view("v1", 0), e], W)
    assert reasons(result.dead_letters) == [("view_mismatch", e.raw)]


# -- lateness ---------------------------------------------------------------------------------
def test_records_behind_the_watermark_are_late():
    v, e = view("v1", 499), eng("like", 499)
    ok_v, ok_e = view("v2", 500), eng("share", 500)
    state = UserJoinState()
    result = add_records(state, [v, e, ok_v, ok_e], 500, PARAMS)
    assert sorted(reasons(result.dead_letters)) == sorted([("late", v.raw), ("late", e.raw)])
    assert state.pending_size() == (1, 1)
    assert labels(advance(state, 600, PARAMS)) == {"v2": {"like": 0, "share": 1, "skip": 0}}


# -- state ------------------------------------------------------------------------------------
def test_state_round_trips_through_bytes():
    state = UserJoinState()
    add_records(
        state,
        [view("v1", 0, context='{"é":1}'), view("v2", 300, post=8), eng("like", 150, view_id="v1"),
         eng("skip", 310, post=8)],
        0,
        PARAMS,
    )
    advance(state, 100, PARAMS)  # v1 closes, its outside-window engagement remembers it
    assert any(p.view_seen for p in state.engagements)
    data = state.to_bytes()
    assert isinstance(data, bytes)
    restored = UserJoinState.from_bytes(data)
    assert restored == state
    assert restored.next_wakeup() == state.next_wakeup() == 250
    assert reasons(advance(restored, 250, PARAMS).orphans) == [("outside_window", "like@" + str(
        state.engagements[0].engagement.source.offset))]


def test_stored_views_drop_their_raw_text():
    state = UserJoinState()
    add_records(state, [view("v1", 0)], 0, PARAMS)
    assert state.views["v1"].raw == ""


def test_unknown_state_format_is_refused():
    import pickle

    with pytest.raises(ValueError, match="format"):
        UserJoinState.from_bytes(pickle.dumps((99, W, [], [])))


def test_next_wakeup_is_earliest_close_and_state_empties():
    state = UserJoinState()
    assert state.is_empty() and state.next_wakeup() is None
    add_records(state, [view("v1", 40), eng("like", 30), view("v2", 70)], 0, PARAMS)
    assert state.next_wakeup() == 130
    assert state.pending_size() == (2, 1)
    advance(state, 130, PARAMS)
    assert state.next_wakeup() == 140
    advance(state, 140, PARAMS)
    assert state.next_wakeup() == 170
    advance(state, 170, PARAMS)
    assert state.is_empty() and state.next_wakeup() is None


def test_join_parameters_are_validated():
    with pytest.raises(ValueError):
        JoinParameters(0, SIGNALS)
    with pytest.raises(ValueError):
        JoinParameters(10, ("like", "like"))


# -- randomized: incremental == brute force ---------------------------------------------------
def view_order(v: View) -> tuple:
    return (v.ts, *v.source.order)


def reference(records, params: JoinParameters):
    """All records known at once: samples, orphans and dead letters as comparable sets."""
    window = params.window_ms
    dead = [(r.reason, r.source) for r in records if isinstance(r, Rejected)]
    views: dict[str, View] = {}
    duplicates = 0
    for v in sorted((r for r in records if isinstance(r, View)), key=lambda r: r.source.order):
        if v.view_id in views:
            duplicates += 1
        else:
            views[v.view_id] = v
    seen: dict[str, set[str]] = {vid: set() for vid in views}
    orphans = []
    for e in (r for r in records if isinstance(r, Engagement)):
        if e.signal not in params.signals:
            dead.append(("unknown_signal", e.source))
            continue
        if e.view_id is not None:
            target = views.get(e.view_id)
            if target is not None and (target.user_id, target.post_id) != (e.user_id, e.post_id):
                dead.append(("view_mismatch", e.source))
                continue
        else:
            candidates = [
                v for v in views.values()
                if (v.user_id, v.post_id) == (e.user_id, e.post_id) and v.ts <= e.ts
            ]
            target = max(candidates, key=view_order) if candidates else None
        if target is None:
            orphans.append(("no_view", e.source))
        elif target.ts <= e.ts < target.ts + window:
            seen[target.view_id].add(e.signal)
        else:
            orphans.append(("outside_window", e.source))
    samples = sorted(
        (v.view_id, v.post_id, v.ts, tuple((s, int(s in seen[v.view_id])) for s in params.signals))
        for v in views.values()
    )
    return samples, sorted(orphans, key=repr), sorted(dead, key=repr), duplicates


def random_case(rng: random.Random):
    """Records plus an arrival order that respects per-partition offsets; duplicates of a
    view_id share a partition so the first arrival is also the lowest offset."""
    window = rng.choice([5, 10, 20])
    params = JoinParameters(window, SIGNALS)
    users, posts, ids = rng.choice([[42], [42, 43]]), [1, 2, 3], [f"v{i}" for i in range(6)]
    protos: list[tuple] = []
    for _ in range(rng.randint(0, 7)):
        vid = rng.choice(ids)
        protos.append(("view", vid, rng.choice(users), rng.choice(posts), rng.randint(0, 40)))
        if rng.random() < 0.2:  # an exact re-delivery
            protos.append(protos[-1])
    views = list(protos)
    for _ in range(rng.randint(0, 9)):
        vid = rng.choice(ids) if rng.random() < 0.5 else None
        signal = rng.choice([*SIGNALS, "dislike"] if rng.random() < 0.1 else SIGNALS)
        user, post, ts = rng.choice(users), rng.choice(posts), rng.randint(0, 60)
        if views and rng.random() < 0.6:  # near a view: inside or just around its window
            _, near_id, user, post, near_ts = rng.choice(views)
            vid = near_id if vid is not None else None
            ts = max(0, near_ts + rng.randint(-3, window + 3))
        protos.append(("eng", vid, user, post, ts, signal))
    if rng.random() < 0.2:
        protos.append(("bad",))
    # roughly event-time order, as Kafka delivers it, so that the watermark can move
    jitter = {id(p): (p[4] if p[0] != "bad" else 0) + rng.randint(0, 15) for p in protos}
    protos.sort(key=lambda p: jitter[id(p)])
    records, next_offset = [], {}
    for proto in protos:
        topic = {"view": "views", "eng": "engagements", "bad": "engagements"}[proto[0]]
        partition = int(proto[1][1:]) % 2 if proto[0] == "view" else rng.randint(0, 1)
        offset = next_offset.get((topic, partition), 0)
        next_offset[(topic, partition)] = offset + 1
        source = Source(topic, partition, offset, 0, None)
        if proto[0] == "view":
            _, vid, user, post, ts = proto
            records.append(View(vid, user, post, ts, f'{{"o":{offset}}}', source, "raw"))
        elif proto[0] == "eng":
            _, vid, user, post, ts, signal = proto
            records.append(Engagement(user, post, vid, signal, ts, f"e{offset}", source))
        else:
            records.append(Rejected(MALFORMED, "x", source))
    return params, records


def watermark_cap(remaining, records, window: int) -> int:
    """The highest watermark before `remaining` arrive that makes none of them late and
    lets no view or engagement they relate to close before they arrive (otherwise the
    forgetting join legitimately differs from the all-at-once reference)."""
    cap = 10**9
    views = [r for r in records if isinstance(r, View)]
    for r in remaining:
        if isinstance(r, Rejected):
            continue
        cap = min(cap, r.ts)
        if isinstance(r, View):
            related = [v.ts for v in views if v.view_id == r.view_id]
            related += [
                e.ts for e in records if isinstance(e, Engagement) and e.view_id == r.view_id
            ]
        elif r.view_id is not None:
            related = [v.ts for v in views if v.view_id == r.view_id]
        else:
            related = [
                v.ts for v in views
                if (v.user_id, v.post_id) == (r.user_id, r.post_id) and v.ts <= r.ts
            ]
        cap = min([cap, *(ts + window - 1 for ts in related)])
    return cap


class Emissions:
    """Collects what the incremental join emitted, checking each is emitted on time."""

    def __init__(self, window: int) -> None:
        self.window = window
        self.samples: list[tuple] = []
        self.orphans: list[tuple] = []
        self.dead: list[tuple] = []
        self.duplicates = 0

    def add(self, result: StepResult, at: int, before: int) -> None:
        """at: the step's watermark; before: the previous advance's (nothing was due then)."""
        for s in result.samples:
            assert before < s.ts + self.window <= at
            self.samples.append((s.view_id, s.post_id, s.ts, s.labels))
        for o in result.orphans:
            assert before < o.engagement.ts + self.window <= at
            self.orphans.append((o.reason, o.engagement.source))
        self.dead.extend((d.reason, d.source) for d in result.dead_letters)
        self.duplicates += result.duplicate_views

    def compared(self) -> tuple:
        return (sorted(self.samples), sorted(self.orphans, key=repr), sorted(self.dead, key=repr),
                self.duplicates)


def test_incremental_join_equals_brute_force():
    rng = random.Random(20260601)
    for _ in range(400):
        params, records = random_case(rng)
        window = params.window_ms
        cuts = sorted(rng.sample(range(1, len(records) + 1), min(len(records), rng.randint(0, 6))))
        batches = [records[a:b] for a, b in zip([0, *cuts], [*cuts, len(records)], strict=True)]
        state, wm, previous = UserJoinState(), 0, -1
        out = Emissions(window)
        for i, batch in enumerate(batches):
            remaining = [r for b in batches[i:] for r in b]
            wm = rng.randint(wm, max(wm, watermark_cap(remaining, records, window)))
            out.add(advance(state, wm, params), wm, previous)  # an idle timer firing
            previous = wm
            out.add(add_records(state, batch, wm, params), wm, previous)
            out.add(advance(state, wm, params), wm, previous)
            due = state.next_wakeup()
            assert due is None or due > wm
            # the adapter keeps the state as bytes between batches
            state = UserJoinState() if state.is_empty() else UserJoinState.from_bytes(
                state.to_bytes()
            )
        out.add(advance(state, 10**9, params), 10**9, previous)
        assert state.is_empty()
        ids = [s[0] for s in out.samples]
        assert len(ids) == len(set(ids)), "a sample was emitted twice"
        assert out.compared() == reference(records, params), records
