"""The feed as sessions: users open sessions (Poisson arrivals) and scroll; each view logs
its context and leads to the engagements a viewer produces, with every case of CONTRACTS.md
section 8 mixed in (null view_ids, late views, outside the window, re-watches, duplicates,
strays and, on request, unknown signals, malformed messages and mismatched view_ids).

Kafka order is event order shuffled within a bound: each message reaches Kafka `delay` after
its event time, 0 <= delay <= max_disorder_ms, and messages leave in arrival order.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from spark_jobs.contracts.topics import TOPIC_ENGAGEMENTS, TOPIC_VIEWS
from spark_jobs.samples.traffic.feed import FEED_PAGE, FeedDraws
from spark_jobs.samples.traffic.messages import engagement_value, malformed_value, view_value
from spark_jobs.samples.traffic.spec import SamplesTrafficSpec, mean_view_ms

# what the generator meant each message to be, for tests and reports (the job must work it
# out itself; e.g. a null-view_id engagement goes to a later re-watch of the same post when
# that view began before the engagement)
VIEW = "view"
DUPLICATE_VIEW = "duplicate_view"
ENGAGEMENT = "engagement"  # carries its view_id
ENGAGEMENT_NULL = "engagement_null"  # view_id null, resolved by (user, post, ts)
DUPLICATE_SIGNAL = "duplicate_signal"
OUTSIDE_WINDOW = "outside_window"
STRAY = "stray"  # its view is not in the traffic
MISMATCH = "mismatch"  # view_id of another post of the same user
UNKNOWN_SIGNAL = "unknown_signal"
MALFORMED = "malformed"
KINDS = (VIEW, DUPLICATE_VIEW, ENGAGEMENT, ENGAGEMENT_NULL, DUPLICATE_SIGNAL, OUTSIDE_WINDOW,
         STRAY, MISMATCH, UNKNOWN_SIGNAL, MALFORMED)

UNKNOWN_SIGNALS = ("follow", "not_interested", "download")

SKEW_MAX_MS = 5_000  # a client clock at most this much behind: engagement before its view
_LONGEST_VIEW_MS = 60_999 * 1.6 + 900


@dataclass
class Event:
    """A message before encoding; arrival orders Kafka."""

    arrival: int
    topic: str
    user_id: int
    ts: int
    value: bytes
    kind: str


class Sessions:
    """Sessions in start order; each session's messages wait in a heap until no later
    session can produce an earlier arrival."""

    def __init__(self, spec: SamplesTrafficSpec, start_ms: int) -> None:
        self.spec = spec
        self.make = FeedDraws(spec)
        self.start_ms = start_ms
        self.heap: list[tuple[int, int, Event]] = []
        self.seq = itertools.count()
        self.views_made = 0
        self.session_begin = start_ms  # no message of a session has an earlier event time

    def push(self, event: Event) -> None:
        heapq.heappush(self.heap, (event.arrival, next(self.seq), event))

    def run(self, views: int | None, collect: list[dict[str, Any]] | None = None,
            steady: bool = False) -> Iterator[Event]:
        """Events in arrival order until `views` views were made (endless when None)."""
        for begin, first_position in self.session_starts(steady):
            if views is not None and self.views_made >= views:
                break
            while self.heap and self.heap[0][0] < begin:  # nothing later comes earlier
                yield heapq.heappop(self.heap)[2]
            left = None if views is None else views - self.views_made
            self.session(begin, left, collect, first_position)
        while self.heap:
            yield heapq.heappop(self.heap)[2]

    def session_starts(self, steady: bool) -> Iterator[tuple[int, int]]:
        """(begin, first feed position) of each session in begin order. steady: also the
        sessions a live feed has open at any instant, so that the view rate is views_per_s
        from the start instead of after a ramp of a few session lengths (minutes)."""
        new = self.new_sessions()
        if not steady:
            return new
        # a renewal process in equilibrium: an open session's next view comes after the
        # residual of a length-biased view; the rest of the session is as long as a new one
        # (exponential lengths are memoryless)
        rng, spec = self.make.rng, self.spec
        opened = round(spec.views_per_s * mean_view_ms(spec) / 1000)
        starts = sorted((self.start_ms + self.residual_ms(), rng.randint(1, 30))
                        for _ in range(opened))
        return heapq.merge(starts, new)

    def new_sessions(self) -> Iterator[tuple[int, int]]:
        """Poisson session starts from start_ms at views_per_s / session_views per second."""
        gap_ms = self.spec.session_views * 1000 / self.spec.views_per_s
        begin = self.start_ms
        while True:
            yield begin, 0
            begin += max(1, round(self.make.rng.expovariate(1.0) * gap_ms))

    def residual_ms(self) -> int:
        """Time left of the view an open session is in: a view drawn in proportion to its
        length (rejection sampling), then a uniform point of it."""
        rng, spec = self.make.rng, self.spec
        while True:
            roll = rng.random()
            if roll < spec.skip_rate:
                dwell = rng.randint(300, 3000)
            elif roll < spec.skip_rate + spec.play_rate:
                dwell = int((rng.randint(5, 60) * 1000 + 500) * rng.uniform(0.5, 1.6))
            else:
                dwell = rng.randint(800, 6000)
            dwell += 525
            if rng.random() * _LONGEST_VIEW_MS < dwell:
                return int(rng.random() * dwell)

    def session(self, begin: int, left: int | None, collect: list[dict[str, Any]] | None,
                first_position: int) -> None:
        make, rng, spec = self.make, self.make.rng, self.spec
        user = make.user()
        profile = make.profile(user)
        count = 1 + int(rng.expovariate(1.0) * (spec.session_views - 1) + 0.5)
        if left is not None:
            count = min(count, left)
        surface = make.surface()
        session_id = make.hex_id(64)
        network = make.network()
        seen: list[tuple[int, str]] = []  # (post, view_id) of this session
        ts = self.session_begin = begin
        request = ""
        for position in range(first_position, first_position + count):
            if position % FEED_PAGE == 0 or not request:
                request = make.hex_id(96)
            if seen and rng.random() < spec.rewatch_share:
                post = rng.choice(seen)[0]
            else:
                post = make.post()
            view_id = make.view_id()
            seen.append((post, view_id))
            duration = rng.randint(5, 60) * 1000 + rng.randint(0, 999)
            view = {"view_id": view_id, "user_id": user, "post_id": post, "ts": ts,
                    "surface": surface, "position": position, "session_id": session_id,
                    "feed_request_id": request, "app_version": profile.app_version,
                    "lang": profile.lang, "device": profile.device,
                    "device_model": profile.device_model, "os_version": profile.os_version,
                    "network": network, "model_score": round(rng.betavariate(2, 5), 6),
                    "video_duration_ms": duration}
            if collect is not None:
                collect.append(view)
            self.views_made += 1
            text = view_value(view)
            self.push(Event(make.delay(ts, rng.random() < spec.late_view_share),
                             TOPIC_VIEWS, user, ts, text, VIEW))
            if rng.random() < spec.duplicate_view_share:
                self.push(Event(ts + rng.randint(0, spec.max_disorder_ms), TOPIC_VIEWS, user,
                                 ts, text, DUPLICATE_VIEW))
            dwell = self.engagements(user, post, view_id, ts, duration, seen)
            ts += dwell + rng.randint(150, 900)
        if rng.random() < spec.stray_share * count:
            self.stray(user, ts)

    def engagements(self, user: int, post: int, view_id: str, ts: int, duration: int,
                    seen: list[tuple[int, str]]) -> int:
        """The view's engagements; returns how long the viewer stayed (ms)."""
        rng, spec = self.make.rng, self.spec
        roll = rng.random()
        signals: list[tuple[str, int]] = []
        if roll < spec.skip_rate:
            dwell = rng.randint(300, 3000)
            signals.append(("skip", dwell))
            if rng.random() < spec.like_rate / 20:
                signals.append(("like", rng.randint(200, dwell)))
        elif roll < spec.skip_rate + spec.play_rate:
            dwell = int(duration * rng.uniform(0.5, 1.6))
            signals.append(("play", rng.randint(1000, max(1000, min(dwell, duration)))))
            for signal, rate, latest in (("like", spec.like_rate, dwell + 5_000),
                                         ("favorite", spec.favorite_rate, dwell + 5_000),
                                         ("comment", spec.comment_rate, dwell + 120_000),
                                         ("share", spec.share_rate, dwell + 60_000)):
                if rng.random() < rate:
                    signals.append((signal, rng.randint(1500, latest)))
        else:
            dwell = rng.randint(800, 6000)
        if rng.random() < spec.unknown_signal_share:
            signals.append((rng.choice(UNKNOWN_SIGNALS), rng.randint(500, dwell + 500)))
        for signal, after in signals:
            self.engagement(user, post, view_id, signal, ts, after, seen)
        return dwell

    def engagement(self, user: int, post: int, view_id: str, signal: str, view_ts: int,
                   after: int, seen: list[tuple[int, str]]) -> None:
        rng, spec = self.make.rng, self.spec
        kind = UNKNOWN_SIGNAL if signal in UNKNOWN_SIGNALS else ENGAGEMENT
        ts = view_ts + min(after, spec.window_ms - 5_000)  # inside unless meant otherwise
        if rng.random() < spec.outside_window_share:
            kind = OUTSIDE_WINDOW
            skew = min(SKEW_MAX_MS, view_ts - self.session_begin)  # not before the session
            if rng.random() < 0.8 or skew < 1:  # came back long after
                ts = view_ts + spec.window_ms + rng.randint(0, spec.window_ms)
            else:  # the client's clock runs behind the server's
                ts = view_ts - rng.randint(1, skew)
        named: str | None = view_id
        if rng.random() < spec.null_view_id_share:
            named = None
            kind = ENGAGEMENT_NULL if kind == ENGAGEMENT else kind
        elif kind == ENGAGEMENT and rng.random() < spec.mismatch_share:
            others = [p for p, _ in seen if p != post]
            post, kind = (others[-1] if others else post + 1), MISMATCH
        topic = TOPIC_ENGAGEMENTS
        if rng.random() < spec.malformed_share:  # a broken message in its place
            topic, kind = rng.choice((TOPIC_VIEWS, TOPIC_ENGAGEMENTS)), MALFORMED
            value = malformed_value(rng, topic, user, post, ts)
        else:
            value = engagement_value(user, post, named, signal, ts)
        self.push(Event(self.make.delay(ts), topic, user, ts, value, kind))
        if kind in (ENGAGEMENT, ENGAGEMENT_NULL) and rng.random() < spec.duplicate_signal_share:
            again = ts + rng.randint(0, 4_000) if rng.random() < 0.5 else ts  # re-tap or resend
            self.push(Event(self.make.delay(again), topic, user, again,
                             engagement_value(user, post, named, signal, again), DUPLICATE_SIGNAL))

    def stray(self, user: int, ts: int) -> None:
        """An engagement on a view outside the traffic: one from before it began."""
        rng = self.make.rng
        named = None if rng.random() < 0.5 else self.make.view_id()
        signal = rng.choice(("like", "play", "skip", "share"))
        self.push(Event(self.make.delay(ts), TOPIC_ENGAGEMENTS, user, ts,
                         engagement_value(user, self.make.post(), named, signal, ts), STRAY))
