"""Per-user state of the experiment metrics job: dedup, first trigger, activation-event join.

One object holds everything the pipeline knows about one user, so the Spark processor needs
a single state read and write per user and micro-batch. It replaces the seed's chain of keyed
functions (de-duplicate events, find first trigger time, interval join, join-results
deduplicator) and fixes its undercounting: an event is buffered until the watermark passes
the end of its window, so an activation that arrives after the event (within the lateness
bound) still makes it count.

Finality argument: a window W is emitted once watermark >= W. Any activation with ts <= an
event's ts < W that has not arrived by then is behind the watermark (late), so the decision
`first_trigger <= ts` taken at that moment never changes afterwards.

Emitted deltas are one user's contribution to one (group, period, event type, window): the
growth of each counted metric (core/metrics.py) while the user's count of the type went from
c - n to c in that window; triggered-user deltas have event_type None and no counts. The
loop over events is the job's hot path (BENCHMARKS.md), so it only counts n and c, and the
metrics are computed once per user, event type and window.

Provisional deltas (`provisional`) feed experiment_metrics_provisional, the live totals of
windows still open: per membership and event type, `live` is the count c of the user's clean
events with first_trigger <= ts < period end, pending ones included. It is kept as records
arrive (an event bumps it in every membership it counts for; a new membership or a lower
first trigger adds the pending events it now covers), so a micro-batch costs one comparison
per accepted event and membership, never a pass over the pending events per user. Live
counts never decrease, so each provisional delta `per_user(live) - per_user(reported)` is
>= 0, and once a period's last window is out they sum to the final deltas of that period.
What was reported is implicit: `provisional` is called whenever the state was loaded, so at
every save live == reported, and only the changes of one load (`changed`, `joined`) are kept
in memory, never persisted.

CUPED's covariate (core/metrics.py, core/pre_exposure.py): every accepted event is also
counted in the user's pre-exposure history; when a membership's trigger window closes, its x
per event type is read from that history (final then) and kept with the membership, the
trigger delta of each type adds x and x², and every later window delta adds x times the
crossed metrics' growth.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from enum import Enum

from spark_jobs.experiments.core.metrics import (
    NO_COUNTS,
    NO_COVARIATES,
    count_index,
    crossed_counts,
    pre_exposure_counts,
    window_counts,
)
from spark_jobs.experiments.core.pre_exposure import PreExposureHistory
from spark_jobs.experiments.core.tumbling_windows import is_late, period_last_window, window_end

GroupKey = tuple[str, str, int]  # experiment_hash, experiment_group, period_start
# (group period, is_control, event_type, window_end) -> [n, running]: the user's counted
# events of the type in the window and their count in the period after it
Counted = dict[tuple[GroupKey, bool, str, int], list[int]]


class Outcome(Enum):
    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    LATE = "late"
    OUTSIDE_PERIOD = "outside_period"


@dataclass(frozen=True)
class MetricParams:
    period_ms: int
    window_ms: int
    dedup_ttl_ms: int
    pre_exposure_windows: int = 0  # CUPED's lookback in whole windows (0: x is always 0)


@dataclass(frozen=True, slots=True)
class Delta:
    experiment_hash: str
    experiment_group: str
    period_start: int
    is_control: bool
    event_type: str | None
    window_end: int | None  # None: a provisional delta (its windows may still be open)
    triggered: int = 0
    counts: tuple[int, ...] = NO_COUNTS  # one per counted metric, in EVENT_METRICS order
    covariates: tuple[int, ...] = NO_COVARIATES  # CUPED's sums, in COVARIATE_COLUMNS order

    def count(self, column: str) -> int:
        """The delta of one counted metric, by its column name."""
        return self.counts[count_index(column)]


@dataclass(slots=True)
class Membership:
    """The user's first trigger in one period of one group and its counted events so far."""

    is_control: bool
    first_trigger: int
    trigger_emitted: bool = False
    counts: dict[str, int] = field(default_factory=dict)
    live: dict[str, int] = field(default_factory=dict)  # counts + the pending counted events
    pre: dict[str, int] = field(default_factory=dict)  # CUPED's x per type, once triggered


class UserMetricsState:
    """Everything kept for one user; `advance(watermark)` emits the deltas of closed windows."""

    __slots__ = ("changed", "history", "joined", "memberships", "params", "pending", "seen")

    def __init__(self, params: MetricParams) -> None:
        self.params = params
        self.memberships: dict[GroupKey, Membership] = {}
        self.pending: list[tuple[int, str]] = []  # clean events whose window is still open
        self.seen: dict[tuple[str, int], None] = {}  # dedup keys (event_type, ts)
        self.history = PreExposureHistory(params.window_ms, params.pre_exposure_windows)
        # since the last `provisional`: the live count each changed (membership, type) had
        # (what was reported), and the memberships not reported yet
        self.changed: dict[tuple[GroupKey, str], int] = {}
        self.joined: list[GroupKey] = []

    # -- input ---------------------------------------------------------------------------
    def add_activation(
        self, experiment_hash: str, group: str, period_start: int, is_control: bool, ts: int,
        watermark_ms: int,
    ) -> Outcome:
        """Record an activation; the smallest ts in the period is the first trigger."""
        if is_late(ts, watermark_ms):
            return Outcome.LATE
        if not period_start <= ts < period_start + self.params.period_ms:
            return Outcome.OUTSIDE_PERIOD
        key = (experiment_hash, group, period_start)
        member = self.memberships.get(key)
        if member is None:
            member = self.memberships[key] = Membership(is_control, ts)
            self.joined.append(key)
            self._cover_pending(key, member, ts, period_start + self.params.period_ms)
        elif ts < member.first_trigger:
            # events of [ts, old first trigger) still pending now count (older ones are
            # behind the watermark: their windows closed, and so would this activation's)
            self._cover_pending(key, member, ts, member.first_trigger)
            member.first_trigger = ts
        return Outcome.ACCEPTED

    def add_event(self, event_type: str, ts: int, watermark_ms: int) -> Outcome:
        """Keep the first event per (event_type, ts); later copies are duplicates."""
        if is_late(ts, watermark_ms):
            return Outcome.LATE
        dedup_key = (event_type, ts)
        if dedup_key in self.seen:
            return Outcome.DUPLICATE
        self.seen[dedup_key] = None
        self.pending.append((ts, event_type))
        self.history.add(event_type, ts)
        period = self.params.period_ms
        for key, member in self.memberships.items():
            if member.first_trigger <= ts < key[2] + period:
                self._grow(key, member, event_type)
        return Outcome.ACCEPTED

    def _grow(self, key: GroupKey, member: Membership, event_type: str) -> None:
        live = member.live
        before = live.get(event_type, 0)
        live[event_type] = before + 1
        self.changed.setdefault((key, event_type), before)

    def _cover_pending(self, key: GroupKey, member: Membership, low: int, high: int) -> None:
        """Count in `live` the pending events with low <= ts < high (high <= period end)."""
        for ts, event_type in self.pending:
            if low <= ts < high:
                self._grow(key, member, event_type)

    def provisional(self) -> list[Delta]:
        """What the user adds to the live totals since the last call: triggered 1 for a new
        membership, and per changed (membership, event type) the growth of each counted
        metric (window_end None). Call it whenever the state was loaded, before `advance`
        expires memberships."""
        deltas = [
            Delta(key[0], key[1], key[2], self.memberships[key].is_control, None, None, 1)
            for key in self.joined if key in self.memberships
        ]
        for (key, event_type), before in self.changed.items():
            member = self.memberships.get(key)
            if member is not None:
                now = member.live[event_type]
                deltas.append(Delta(key[0], key[1], key[2], member.is_control, event_type,
                                    None, 0, window_counts(now - before, now)))
        self.joined = []
        self.changed = {}
        return deltas

    # -- progress ------------------------------------------------------------------------
    def advance(self, watermark_ms: int) -> list[Delta]:
        """Emit contributions to every window with end <= watermark; drop state no longer needed."""
        window = self.params.window_ms
        deltas: list[Delta] = []

        for key, member in self.memberships.items():
            trigger_window = window_end(member.first_trigger, window)
            if not member.trigger_emitted and trigger_window <= watermark_ms:
                member.trigger_emitted = True
                deltas.append(
                    Delta(key[0], key[1], key[2], member.is_control, None, trigger_window, 1)
                )
                member.pre = self.history.volume_before(member.first_trigger)
                deltas += [
                    Delta(key[0], key[1], key[2], member.is_control, event_type,
                          trigger_window, 0, NO_COUNTS, pre_exposure_counts(x))
                    for event_type, x in member.pre.items()
                ]

        if self.pending:
            self.pending.sort()
            counted: Counted = {}
            closed = 0
            for ts, event_type in self.pending:
                end = window_end(ts, window)
                if end > watermark_ms:
                    break
                closed += 1
                self._count_event(ts, event_type, end, counted)
            del self.pending[:closed]
            deltas += [self._window_delta(key, is_control, event_type, end, n, running)
                       for (key, is_control, event_type, end), (n, running) in counted.items()]

        self._expire(watermark_ms)
        return deltas

    def _window_delta(self, key: GroupKey, is_control: bool, event_type: str, end: int,
                      n: int, running: int) -> Delta:
        counts = window_counts(n, running)
        pre = self.memberships[key].pre.get(event_type, 0)
        return Delta(key[0], key[1], key[2], is_control, event_type, end, 0, counts,
                     crossed_counts(pre, counts))

    def _count_event(self, ts: int, event_type: str, end: int, counted: Counted) -> None:
        period = self.params.period_ms
        for key, member in self.memberships.items():
            if member.first_trigger <= ts < key[2] + period:
                running = member.counts.get(event_type, 0) + 1
                member.counts[event_type] = running
                where = (key, member.is_control, event_type, end)
                acc = counted.get(where)
                if acc is None:
                    counted[where] = [1, running]
                else:
                    acc[0] += 1
                    acc[1] = running

    def _expire(self, watermark_ms: int) -> None:
        period, window = self.params.period_ms, self.params.window_ms
        for key in [
            k for k in self.memberships
            if period_last_window(k[2], period, window) <= watermark_ms
        ]:
            del self.memberships[key]
        ttl = self.params.dedup_ttl_ms
        if self.seen:
            for dedup_key in [k for k in self.seen if k[1] + ttl < watermark_ms]:
                del self.seen[dedup_key]
        self.history.forget_before(watermark_ms)

    def next_wakeup(self) -> int | None:
        """Earliest event time at which `advance` has work: always a window end."""
        window = self.params.window_ms
        times = [
            window_end(m.first_trigger, window)
            for m in self.memberships.values()
            if not m.trigger_emitted
        ]
        times += [period_last_window(k[2], self.params.period_ms, window) for k in self.memberships]
        if self.pending:
            times.append(window_end(min(self.pending)[0], window))
        if self.seen:
            oldest = min(ts for _, ts in self.seen)
            times.append(window_end(oldest + self.params.dedup_ttl_ms, window))
        expiry = self.history.next_expiry()
        if expiry is not None:
            times.append(expiry)
        return min(times) if times else None

    def is_empty(self) -> bool:
        return not (self.memberships or self.pending or self.seen or self.history.counts)

    # -- persistence ---------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        members = {
            k: (m.is_control, m.first_trigger, m.trigger_emitted, m.counts, m.live, m.pre)
            for k, m in self.memberships.items()
        }
        return pickle.dumps(
            (members, self.pending, list(self.seen), self.history.counts),
            protocol=pickle.HIGHEST_PROTOCOL,
        )

    @classmethod
    def from_bytes(cls, params: MetricParams, blob: bytes | None) -> UserMetricsState:
        state = cls(params)
        if blob:
            # saved before CUPED: no history, and memberships without x (counted as 0)
            members, pending, seen, *history = pickle.loads(blob)
            state.memberships = {k: Membership(*v) for k, v in members.items()}
            state.pending = pending
            state.seen = dict.fromkeys(seen)
            if history:
                state.history = PreExposureHistory(params.window_ms,
                                                   params.pre_exposure_windows, history[0])
            for key, member in state.memberships.items():
                if len(members[key]) == 4:  # saved before provisional rows: none reported
                    state._report_all(key, member)
        return state

    def _report_all(self, key: GroupKey, member: Membership) -> None:
        """Live counts of a membership saved without them, all to be reported as new."""
        self.joined.append(key)
        for event_type, count in member.counts.items():
            member.live[event_type] = count
            self.changed[(key, event_type)] = 0
        self._cover_pending(key, member, member.first_trigger, key[2] + self.params.period_ms)
