"""The synthetic views/engagements traffic: seeded, bounded disorder, every case of the mix,
contract-shaped messages (no broker: producing goes to a fake producer)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from spark_jobs.contracts.topics import TOPIC_ENGAGEMENTS, TOPIC_VIEWS
from spark_jobs.samples.traffic import (
    DUPLICATE_SIGNAL,
    DUPLICATE_VIEW,
    ENGAGEMENT,
    ENGAGEMENT_NULL,
    MALFORMED,
    MISMATCH,
    OUTSIDE_WINDOW,
    STRAY,
    UNKNOWN_SIGNAL,
    UNKNOWN_SIGNALS,
    VIEW,
    SamplesTrafficSpec,
    annotated_traffic,
    expected_rate,
    generate_traffic,
    generate_views,
    produce_samples_traffic,
    traffic_mix,
)
from spark_jobs.settings import load_settings

SIGNALS = ("like", "share", "comment", "favorite", "play", "skip")
VIEW_KEYS = ("view_id", "user_id", "post_id", "ts")
SPEC = SamplesTrafficSpec(users=300, posts=2000, seed=5)
WILD = SamplesTrafficSpec(users=300, posts=2000, seed=5, unknown_signal_share=0.02,
                          malformed_share=0.01, mismatch_share=0.02)


@pytest.fixture(scope="module")
def annotated():
    return list(annotated_traffic(SPEC, 4000))


@pytest.fixture(scope="module")
def wild():
    return list(annotated_traffic(WILD, 4000))


def valid_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def test_same_seed_same_bytes_other_seed_other_bytes(annotated):
    records = [r for r, _ in annotated]
    assert generate_traffic(SPEC, 4000) == records
    other = generate_traffic(SamplesTrafficSpec(users=300, posts=2000, seed=6), 4000)
    assert [r.value for r in other[:200]] != [r.value for r in records[:200]]


@pytest.mark.parametrize("bound", [0, 5_000, 60_000, 110_000])
def test_no_message_is_later_than_max_disorder_behind_the_largest_event_time(bound):
    spec = SamplesTrafficSpec(users=200, posts=500, seed=bound, max_disorder_ms=bound,
                              malformed_share=0.01, unknown_signal_share=0.01)
    highest, displaced, worst = None, 0, 0
    for record in generate_traffic(spec, 3000):
        if highest is not None:
            worst = max(worst, highest - record.timestamp)
            displaced += record.timestamp < highest
        highest = record.timestamp if highest is None else max(highest, record.timestamp)
    assert worst <= bound
    if bound:
        assert displaced > 100 and worst > bound * 0.8  # the bound is used, not just kept
    else:
        assert displaced == 0


def test_every_view_comes_once_per_view_count_and_in_the_contract_shape(annotated):
    views = [json.loads(r.value) for r, kind in annotated if kind == VIEW]
    assert len(views) == 4000 == len({v["view_id"] for v in views})
    for record, kind in annotated:
        if record.topic == TOPIC_VIEWS and kind in (VIEW, DUPLICATE_VIEW):
            view = json.loads(record.value)
            assert list(view)[:4] == list(VIEW_KEYS)
            assert isinstance(view["view_id"], str) and view["view_id"]
            assert valid_int(view["user_id"]) and valid_int(view["post_id"])
            assert valid_int(view["ts"]) and view["ts"] >= 0
            assert record.key == str(view["user_id"]) and record.timestamp == view["ts"]
    sizes = [len(r.value) for r, kind in annotated if kind == VIEW]
    assert min(sizes) >= 250 and max(sizes) <= 400
    first = next(r for r, kind in annotated if kind == VIEW)
    context = {k for k in json.loads(first.value) if k not in VIEW_KEYS}
    assert {"surface", "position", "session_id", "feed_request_id", "app_version", "lang",
            "device", "network", "model_score"} <= context


def test_engagements_are_contract_shaped_and_use_the_default_signals(annotated):
    signals = Counter()
    for record, _kind in annotated:
        if record.topic != TOPIC_ENGAGEMENTS:
            continue
        engagement = json.loads(record.value)
        assert list(engagement) == ["user_id", "post_id", "view_id", "signal", "ts"]
        assert engagement["view_id"] is None or isinstance(engagement["view_id"], str)
        assert valid_int(engagement["user_id"]) and valid_int(engagement["ts"])
        assert record.key == str(engagement["user_id"])
        signals[engagement["signal"]] += 1
    assert set(signals) == set(SIGNALS)
    views = 4000
    # realistic rates: most views end in play or skip, likes a few per cent, shares rare
    assert 0.4 < signals["play"] / views < 0.65 and 0.3 < signals["skip"] / views < 0.45
    assert 0.03 < signals["like"] / views < 0.09
    assert signals["share"] < signals["comment"] < signals["favorite"] < signals["like"]


def test_the_mix_has_every_case_of_the_contract(annotated):
    mix = traffic_mix(annotated)
    views = mix[VIEW]
    assert mix[ENGAGEMENT] > mix[ENGAGEMENT_NULL] > 0.15 * (mix[ENGAGEMENT] + mix[ENGAGEMENT_NULL])
    assert mix["before_view"] > 0.02 * views  # engagements that reach Kafka before their view
    for kind, low, high in ((OUTSIDE_WINDOW, 0.002, 0.03), (DUPLICATE_VIEW, 0.001, 0.02),
                            (DUPLICATE_SIGNAL, 0.01, 0.06), (STRAY, 0.001, 0.02)):
        assert low * views < mix[kind] < high * views, kind
    assert mix[UNKNOWN_SIGNAL] == mix[MALFORMED] == mix[MISMATCH] == 0
    total = sum(mix[k] for k in mix if k not in ("before_view", "displaced"))
    assert abs(total / views - expected_rate(SPEC)) < 0.1


def test_outside_window_engagements_miss_the_window_and_others_hit_it(annotated):
    views = {}
    for record, kind in annotated:
        if kind == VIEW:
            view = json.loads(record.value)
            views[view["view_id"]] = view["ts"]
    window = SPEC.window_ms
    outside = inside = 0
    for record, kind in annotated:
        engagement = json.loads(record.value) if record.topic == TOPIC_ENGAGEMENTS else {}
        view_ts = views.get(engagement.get("view_id"))
        if view_ts is None:
            continue
        hit = view_ts <= engagement["ts"] < view_ts + window
        if kind == OUTSIDE_WINDOW:
            outside += 1
            assert not hit
        elif kind in (ENGAGEMENT, DUPLICATE_SIGNAL):
            inside += 1
            assert hit
    assert outside > 0 and inside > 1000


def test_rewatched_posts_give_several_views_of_one_user_and_post(annotated):
    pairs = Counter((json.loads(r.value)["user_id"], json.loads(r.value)["post_id"])
                    for r, kind in annotated if kind == VIEW)
    assert sum(1 for n in pairs.values() if n > 1) > 20


def test_on_request_unknown_signals_malformed_messages_and_mismatched_view_ids(wild):
    mix = traffic_mix(wild)
    assert mix[UNKNOWN_SIGNAL] > 20 and mix[MALFORMED] > 20 and mix[MISMATCH] > 20
    views = {}
    for record, kind in wild:
        if kind == VIEW:
            view = json.loads(record.value)
            views[view["view_id"]] = (view["user_id"], view["post_id"])
    for record, kind in wild:
        if kind == UNKNOWN_SIGNAL:
            assert json.loads(record.value)["signal"] in UNKNOWN_SIGNALS
        elif kind == MISMATCH:
            engagement = json.loads(record.value)
            user, post = views[engagement["view_id"]]
            assert user == engagement["user_id"] and post != engagement["post_id"]
        elif kind == MALFORMED:
            assert not well_formed(record.topic, record.value), record.value


def well_formed(topic, value):
    """The lead's validity rules of the spec, to check that malformed means malformed."""
    try:
        record = json.loads(value)
    except ValueError:
        return False
    if not isinstance(record, dict):
        return False
    ints = all(valid_int(record.get(k)) for k in ("user_id", "post_id", "ts"))
    if not ints or record["ts"] < 0:
        return False
    view_id = record.get("view_id")
    if topic == TOPIC_VIEWS:
        return isinstance(view_id, str) and view_id != ""
    return isinstance(record.get("signal"), str) and (
        view_id is None or (isinstance(view_id, str) and view_id != ""))


def test_generate_views_gives_the_views_of_the_traffic(annotated):
    views = generate_views(SPEC, 4000)
    sent = [json.loads(r.value) for r, kind in annotated if kind == VIEW]
    assert sorted(views, key=lambda v: v["view_id"]) == sorted(sent, key=lambda v: v["view_id"])


def test_views_fill_event_time_at_the_requested_rate():
    spec = SamplesTrafficSpec(users=2000, posts=5000, views_per_s=50.0, session_views=4.0)
    views = generate_views(spec, 30_000)
    starts = sorted(v["ts"] for v in views)
    middle = starts[len(starts) // 4: 3 * len(starts) // 4]  # past the ramp-up and the tail
    rate = len(middle) / ((middle[-1] - middle[0]) / 1000)
    assert 40 < rate < 60


def test_the_spec_rejects_nonsense():
    with pytest.raises(ValueError, match="skip_rate"):
        SamplesTrafficSpec(skip_rate=0.6, play_rate=0.6)
    with pytest.raises(ValueError, match="null_view_id_share"):
        SamplesTrafficSpec(null_view_id_share=1.5)
    with pytest.raises(ValueError, match="window_ms"):
        SamplesTrafficSpec(window_ms=1000)


def test_from_settings_uses_the_jobs_window_and_half_its_lateness():
    settings = load_settings(environ={}, overrides={"samples": {"window": "20s",
                                                                "lateness": "6s"}})
    spec = SamplesTrafficSpec.from_settings(settings.samples, users=10)
    assert (spec.window_ms, spec.max_disorder_ms, spec.users) == (20_000, 3_000, 10)
    defaults = load_settings(environ={}).samples
    assert SamplesTrafficSpec.from_settings(defaults) == SamplesTrafficSpec()


class FakeProducer:
    def __init__(self):
        self.sent = []

    def produce(self, topic, value, key, timestamp, on_delivery):
        self.sent.append((topic, value, key, timestamp))

    def poll(self, _timeout):
        return 0

    def flush(self, _timeout):
        return 0


def test_the_paced_producer_sends_live_traffic_at_the_rate_in_arrival_order():
    fake = FakeProducer()
    spec = SamplesTrafficSpec(users=500, posts=1000)
    report = produce_samples_traffic(None, views_per_s=200, seconds=3.0, producer=fake,  # type: ignore[arg-type]
                                     spec=spec)
    assert report.sent == len(fake.sent) > 0
    assert 2.9 <= report.elapsed_s < 5
    assert report.max_behind_ms < 500
    # the feed starts in its steady state: ~200 views in the first second of event time
    # (less the few whose Kafka delay ends after 3 s), not the ~17 of new sessions alone
    started = min(s[3] for s in fake.sent if s[0] == TOPIC_VIEWS)
    views = Counter((s[3] - started) // 1000 for s in fake.sent if s[0] == TOPIC_VIEWS)
    assert 150 <= views[0] <= 260
    highest = None
    for _topic, _value, _key, timestamp in fake.sent:
        highest = timestamp if highest is None else max(highest, timestamp)
        assert timestamp >= highest - spec.max_disorder_ms
    for topic, value, key, timestamp in fake.sent:
        record = json.loads(value)
        assert record["ts"] == timestamp and key == str(record["user_id"])
        assert topic in (TOPIC_VIEWS, TOPIC_ENGAGEMENTS)
