"""Synthetic short-video feed traffic for the training_samples job: views and engagements.

`generate_traffic` is pure and seeded: the same spec gives the same Kafka messages, byte for
byte, in the same order. Users open sessions (Poisson arrivals, Zipf-like activity) and
scroll a feed: each view logs the context a ranking system records (surface, position,
session, feed request, app and device, network, model score, ...; 300-400 bytes of JSON),
and each view leads to the engagements a viewer produces: a `skip` after a second or two,
or a `play`, sometimes followed by like, favorite, comment or share, with the usual rates.

Every case of CONTRACTS.md section 8 occurs: engagements with and without a view_id,
engagements that reach Kafka before their view (the view was delayed), engagements outside
the attribution window (a late return, a skewed client clock), re-watched posts (several
views of one user and post), duplicate views and duplicate signals, engagements whose view is
not in the traffic, and on request unknown signals, malformed messages and view_ids of
another post.

Kafka order is event order shuffled within a bound: each message reaches Kafka `delay` after
its event time, 0 <= delay <= `max_disorder_ms`, and messages are in arrival order. So no
message is more than max_disorder_ms behind the largest event time before it; with
max_disorder_ms <= samples.lateness nothing well-formed is late.

`produce_samples_traffic` sends the traffic to Kafka in real time: a message leaves when the
wall clock reaches its arrival, event times start at the wall clock, and the feed starts in
its steady state (views at views_per_s from the first second; engagements, logged when a
play ends, reach their rate within a minute).
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import random
import threading
import time
import uuid
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson

from spark_jobs.contracts.topics import TOPIC_ENGAGEMENTS, TOPIC_VIEWS
from spark_jobs.fraud.traffic import DEFAULT_START_MS, ProductionReport
from spark_jobs.settings import Settings

FLUSH_TIMEOUT_S = 60.0
SKEW_MAX_MS = 5_000  # a client clock at most this much behind: engagement before its view

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
MALFORMED_KINDS = {  # per topic: each breaks one of the spec's validity rules
    TOPIC_VIEWS: ("not_json", "json_array", "user_id_string", "post_id_bool", "negative_ts",
                  "ts_float", "missing_view_id", "empty_view_id"),
    TOPIC_ENGAGEMENTS: ("not_json", "json_array", "user_id_string", "post_id_bool",
                        "negative_ts", "ts_float", "empty_view_id", "missing_signal",
                        "signal_int"),
}

_SURFACES = (("for_you", 0.8), ("following", 0.12), ("explore", 0.05), ("search", 0.03))
_DEVICES = {
    "ios": (("iPhone15,3", "iPhone14,5", "iPhone16,1", "iPhone13,2"), ("17.6.1", "18.1", "18.2")),
    "android": (("SM-S918B", "Pixel 8", "SM-A546E", "2201117TY", "CPH2581"),
                ("13", "14", "15")),
}
_LOCALES = (("en-US", 0.45), ("en-GB", 0.08), ("es-MX", 0.1), ("pt-BR", 0.1), ("de-DE", 0.07),
            ("fr-FR", 0.06), ("ja-JP", 0.06), ("id-ID", 0.08))
_NETWORKS = (("wifi", 0.6), ("5g", 0.2), ("4g", 0.18), ("3g", 0.02))
_APP_VERSIONS = (("34.2.1", 0.55), ("34.1.0", 0.3), ("33.9.4", 0.15))
FEED_PAGE = 8  # views served per feed request
_LONGEST_VIEW_MS = 60_999 * 1.6 + 900


class Record(NamedTuple):
    """One Kafka message: key is str(user_id), timestamp the event time (ms)."""

    topic: str
    key: str | None
    value: bytes
    timestamp: int


@dataclass(frozen=True)
class SamplesTrafficSpec:
    """What the generated traffic looks like.

    Rates are per view: play_rate and skip_rate of views (the rest just scroll past), the
    others per played view (likes, favorites, comments, shares). views_per_s is how fast event
    time fills with views. window_ms is the attribution window that `outside_window_share`
    engagements miss (keep it equal to samples.window); max_disorder_ms bounds how far behind
    the largest event time so far a message may arrive (keep it below samples.lateness).
    """

    users: int = 20_000
    posts: int = 100_000
    user_skew: float = 0.6
    post_skew: float = 0.9
    views_per_s: float = 100.0
    session_views: float = 12.0
    window_ms: int = 600_000
    max_disorder_ms: int = 60_000
    skip_rate: float = 0.38
    play_rate: float = 0.52
    like_rate: float = 0.1
    favorite_rate: float = 0.03
    comment_rate: float = 0.015
    share_rate: float = 0.012
    null_view_id_share: float = 0.25
    late_view_share: float = 0.03
    outside_window_share: float = 0.01
    rewatch_share: float = 0.02
    duplicate_view_share: float = 0.005
    duplicate_signal_share: float = 0.03
    stray_share: float = 0.005
    unknown_signal_share: float = 0.0
    malformed_share: float = 0.0
    mismatch_share: float = 0.0
    seed: int = 11

    def __post_init__(self) -> None:
        if self.users <= 0 or self.posts <= 1:
            raise ValueError("users must be positive and posts at least 2")
        if self.views_per_s <= 0 or self.session_views < 1:
            raise ValueError("views_per_s must be positive and session_views >= 1")
        if self.window_ms < 10_000 or self.max_disorder_ms < 0:
            raise ValueError("window_ms must be at least 10 s and max_disorder_ms >= 0")
        if self.skip_rate + self.play_rate > 1:
            raise ValueError("skip_rate + play_rate must be at most 1")
        shares = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                  if f.name.endswith(("_rate", "_share"))}
        bad = [name for name, value in shares.items() if not 0 <= value <= 1]
        if bad:
            raise ValueError(f"{', '.join(bad)} must lie in [0, 1]")


def _cumulative(weights: Iterable[float]) -> list[float]:
    return list(itertools.accumulate(weights))


def _weighted(options: tuple[tuple[str, float], ...], rng: random.Random) -> str:
    point = rng.random() * sum(w for _, w in options)
    for name, weight in options:
        point -= weight
        if point < 0:
            return name
    return options[-1][0]


@dataclass(frozen=True)
class _Profile:
    """What stays the same for a user: locale, device, app."""

    lang: str
    device: str
    device_model: str
    os_version: str
    app_version: str


@dataclass
class _Event:
    """A message before encoding; arrival orders Kafka."""

    arrival: int
    topic: str
    user_id: int
    ts: int
    value: bytes
    kind: str


@dataclass
class _Maker:
    """Draws of one spec, from one seeded random source."""

    spec: SamplesTrafficSpec
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        spec = self.spec
        self.rng = random.Random(spec.seed)
        self._users = _cumulative(1 / (k + 1) ** spec.user_skew for k in range(spec.users))
        self._posts = _cumulative(1 / (k + 1) ** spec.post_skew for k in range(spec.posts))
        shuffle = random.Random(spec.seed + 1)
        self._user_ids = list(range(100_001, 100_001 + spec.users))
        self._post_ids = list(range(7_000_001, 7_000_001 + spec.posts))
        shuffle.shuffle(self._user_ids)
        shuffle.shuffle(self._post_ids)
        self._profiles: dict[int, _Profile] = {}

    def _pick(self, cumulative: list[float]) -> int:
        return bisect_right(cumulative, self.rng.random() * cumulative[-1])

    def user(self) -> int:
        return self._user_ids[self._pick(self._users)]

    def post(self) -> int:
        return self._post_ids[self._pick(self._posts)]

    def profile(self, user_id: int) -> _Profile:
        found = self._profiles.get(user_id)
        if found is None:
            rng = random.Random(self.spec.seed * 1_000_003 + user_id)  # order independent
            lang = _weighted(_LOCALES, rng)
            device = "ios" if rng.random() < 0.45 else "android"
            models, versions = _DEVICES[device]
            found = _Profile(lang, device, rng.choice(models), rng.choice(versions),
                             _weighted(_APP_VERSIONS, rng))
            self._profiles[user_id] = found
        return found

    def hex_id(self, bits: int) -> str:
        return f"{self.rng.getrandbits(bits):0{bits // 4}x}"

    def view_id(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def delay(self, ts: int, late: bool = False) -> int:
        """Arrival in Kafka: most messages within a second or two, late ones near the bound."""
        bound = self.spec.max_disorder_ms
        if bound == 0:
            return ts
        if late:
            return ts + self.rng.randint(bound // 2, bound)
        return ts + min(bound, int(self.rng.expovariate(1.0) * min(bound, 60_000) / 40))


def _view_value(view: dict[str, Any]) -> bytes:
    return orjson.dumps(view)


def _engagement(user_id: int, post_id: int, view_id: str | None, signal: str, ts: int
                ) -> bytes:
    return orjson.dumps({"user_id": user_id, "post_id": post_id, "view_id": view_id,
                         "signal": signal, "ts": ts})


def _malformed(rng: random.Random, topic: str, user_id: int, post_id: int, ts: int) -> bytes:
    kind = rng.choice(MALFORMED_KINDS[topic])
    good: dict[str, Any] = (
        {"view_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)), "user_id": user_id,
         "post_id": post_id, "ts": ts, "surface": "for_you"}
        if topic == TOPIC_VIEWS else
        {"user_id": user_id, "post_id": post_id, "view_id": None, "signal": "like", "ts": ts})
    if kind == "not_json":
        return orjson.dumps(good)[: rng.randint(5, 30)]
    if kind == "json_array":
        return orjson.dumps(list(good.values()))
    if kind.startswith("missing_"):
        good.pop(kind.removeprefix("missing_"))
    else:
        name, value = {
            "empty_view_id": ("view_id", ""), "user_id_string": ("user_id", str(user_id)),
            "post_id_bool": ("post_id", True), "negative_ts": ("ts", -ts),
            "ts_float": ("ts", ts + 0.5), "signal_int": ("signal", 3),
        }[kind]
        good[name] = value
    return orjson.dumps(good)


class _Generator:
    """Sessions in start order; each session's messages wait in a heap until no later
    session can produce an earlier arrival."""

    def __init__(self, spec: SamplesTrafficSpec, start_ms: int) -> None:
        self.spec = spec
        self.make = _Maker(spec)
        self.start_ms = start_ms
        self.heap: list[tuple[int, int, _Event]] = []
        self.seq = itertools.count()
        self.views_made = 0
        self.session_begin = start_ms  # no message of a session has an earlier event time

    def push(self, event: _Event) -> None:
        heapq.heappush(self.heap, (event.arrival, next(self.seq), event))

    def run(self, views: int | None, collect: list[dict[str, Any]] | None = None,
            steady: bool = False) -> Iterator[_Event]:
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
        surface = _weighted(_SURFACES, rng)
        session_id = make.hex_id(64)
        network = _weighted(_NETWORKS, rng)
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
            text = _view_value(view)
            self.push(_Event(make.delay(ts, rng.random() < spec.late_view_share),
                             TOPIC_VIEWS, user, ts, text, VIEW))
            if rng.random() < spec.duplicate_view_share:
                self.push(_Event(ts + rng.randint(0, spec.max_disorder_ms), TOPIC_VIEWS, user,
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
            value = _malformed(rng, topic, user, post, ts)
        else:
            value = _engagement(user, post, named, signal, ts)
        self.push(_Event(self.make.delay(ts), topic, user, ts, value, kind))
        if kind in (ENGAGEMENT, ENGAGEMENT_NULL) and rng.random() < spec.duplicate_signal_share:
            again = ts + rng.randint(0, 4_000) if rng.random() < 0.5 else ts  # re-tap or resend
            self.push(_Event(self.make.delay(again), topic, user, again,
                             _engagement(user, post, named, signal, again), DUPLICATE_SIGNAL))

    def stray(self, user: int, ts: int) -> None:
        """An engagement on a view outside the traffic: one from before it began."""
        rng = self.make.rng
        named = None if rng.random() < 0.5 else self.make.view_id()
        signal = rng.choice(("like", "play", "skip", "share"))
        self.push(_Event(self.make.delay(ts), TOPIC_ENGAGEMENTS, user, ts,
                         _engagement(user, self.make.post(), named, signal, ts), STRAY))


def annotated_traffic(spec: SamplesTrafficSpec = SamplesTrafficSpec(), views: int | None = 1000,
                      start_ms: int = DEFAULT_START_MS) -> Iterator[tuple[Record, str]]:
    """Messages in Kafka order with what each one is (one of KINDS); `views` views and their
    engagements (endless when None)."""
    for event in _Generator(spec, start_ms).run(views):
        yield Record(event.topic, str(event.user_id), event.value, event.ts), event.kind


def generate_traffic(spec: SamplesTrafficSpec = SamplesTrafficSpec(), views: int = 1000,
                     start_ms: int = DEFAULT_START_MS) -> list[Record]:
    """`views` views and their engagements as (topic, key, value, timestamp) in Kafka order."""
    return [record for record, _ in annotated_traffic(spec, views, start_ms)]


def generate_views(spec: SamplesTrafficSpec = SamplesTrafficSpec(), views: int = 1000,
                   start_ms: int = DEFAULT_START_MS) -> list[dict[str, Any]]:
    """The view objects alone (event order within a session), e.g. to build samples from."""
    found: list[dict[str, Any]] = []
    for _ in _Generator(spec, start_ms).run(views, collect=found):
        pass
    return found


def traffic_mix(annotated: Iterable[tuple[Record, str]]) -> Counter[str]:
    """Messages per kind, plus `before_view`: engagements that precede their view in Kafka
    order, and `displaced`: messages with an event time below one already sent."""
    mix: Counter[str] = Counter()
    sent_views: set[str] = set()
    waiting: Counter[str] = Counter()
    highest = None
    for record, kind in annotated:
        mix[kind] += 1
        if highest is not None and record.timestamp < highest:
            mix["displaced"] += 1
        highest = record.timestamp if highest is None else max(highest, record.timestamp)
        if kind in (MALFORMED, STRAY):
            continue
        view_id = orjson.loads(record.value).get("view_id")
        if record.topic == TOPIC_VIEWS:
            sent_views.add(view_id)
            mix["before_view"] += waiting.pop(view_id, 0)
        elif view_id is not None and view_id not in sent_views:
            waiting[view_id] += 1
    return mix


# ------------------------------------------------------------------------------ producing


def produce_samples_traffic(
    settings: Settings,
    views_per_s: float,
    seconds: float,
    spec: SamplesTrafficSpec = SamplesTrafficSpec(),
    stop_event: threading.Event | None = None,
    producer: Any = None,
) -> ProductionReport:
    """Send live traffic of views_per_s views per second (about twice as many messages with
    their engagements) for `seconds` or until stop_event is set. A message leaves when the
    wall clock reaches its arrival (event time + its Kafka delay), keyed by user_id, with its
    event time as the Kafka timestamp. The feed starts in its steady state (sessions already
    open), so the rate holds from the first second. Messages due after `seconds` are not
    sent. Raises RuntimeError when a delivery fails."""
    from spark_jobs.streaming.kafka.producer import make_producer

    if views_per_s <= 0 or seconds <= 0:
        raise ValueError("views_per_s and seconds must be positive")
    kafka = producer if producer is not None else make_producer(settings.kafka)
    failures: list[Any] = []

    def on_delivery(error: Any, _message: Any) -> None:
        if error is not None:
            failures.append(error)

    report = ProductionReport()
    start_ms = int(time.time() * 1000)
    clock = time.monotonic
    started = clock()
    generator = _Generator(dataclasses.replace(spec, views_per_s=views_per_s), start_ms)
    for event in generator.run(None, steady=True):
        if failures or (stop_event is not None and stop_event.is_set()):
            break
        due = (event.arrival - start_ms) / 1000
        if due > seconds:
            break
        ahead = started + due - clock()
        if ahead >= 0.002:
            time.sleep(ahead)
        elif -ahead * 1000 > report.max_behind_ms:
            report.max_behind_ms = -ahead * 1000
        while True:
            try:
                kafka.produce(event.topic, event.value, str(event.user_id),
                              timestamp=event.ts, on_delivery=on_delivery)
                break
            except BufferError:
                kafka.poll(0.01)
        kafka.poll(0)
        if report.first_ms is None:
            report.first_ms = event.ts
        report.last_ms = event.ts
        report.sent += 1
    undelivered = kafka.flush(FLUSH_TIMEOUT_S)
    report.elapsed_s = clock() - started
    if failures or undelivered:
        raise RuntimeError(f"{len(failures)} message(s) failed, {undelivered} undelivered; "
                           f"first: {failures[0] if failures else None}")
    return report


def mean_view_ms(spec: SamplesTrafficSpec = SamplesTrafficSpec()) -> float:
    """How long a view lasts on average, until the next view of its session (ms)."""
    played = 32_500 * 1.05  # video length 5-60 s, watched 0.5-1.6 times
    rest = 1 - spec.skip_rate - spec.play_rate
    return spec.skip_rate * 1650 + spec.play_rate * played + rest * 3400 + 525


def expected_rate(spec: SamplesTrafficSpec = SamplesTrafficSpec()) -> float:
    """Messages per view on average (views, engagements, duplicates): sizing a run."""
    engaged = (spec.skip_rate * (1 + spec.like_rate / 20)
               + spec.play_rate * (1 + spec.like_rate + spec.favorite_rate + spec.comment_rate
                                   + spec.share_rate))
    return (1 + spec.duplicate_view_share + engaged * (1 + spec.duplicate_signal_share)
            + spec.stray_share)

