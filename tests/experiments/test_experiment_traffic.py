"""The synthetic traffic generator: deterministic, never late, and rich in every edge case the
experiment pipeline must handle (no broker: producing goes to a fake producer)."""

from __future__ import annotations

import itertools
import threading
from collections import Counter, defaultdict

import orjson
import pytest
from helpers.steps import StepRecorder
from reference.metrics_reference import periods_of

from spark_jobs.config.steps import recording
from spark_jobs.contracts.records import ACTIVATION, EVENT, RecordError
from spark_jobs.contracts.tables import RAMPS_HEADER
from spark_jobs.contracts.topics import TOPIC_ACTIVATIONS, TOPIC_EVENTS
from spark_jobs.experiments.traffic import (
    DUPLICATE,
    GOOD,
    MALFORMED,
    MALFORMED_KINDS,
    SPAM,
    GenerationError,
    TrafficSpec,
    first_ramp_up_ms,
    generate,
    produce,
    run_for,
    tally,
    write_ramps_csv,
)
from spark_jobs.settings import load_settings

HOUR = 3_600_000
SPEC = TrafficSpec(seed=11, n_users=400, malformed_rate=0.01)


@pytest.fixture(scope="module")
def records():
    return list(generate(SPEC))


def test_same_seed_same_bytes_other_seed_other_bytes(records):
    again = list(generate(TrafficSpec(seed=11, n_users=400, malformed_rate=0.01)))
    assert again == records
    other = list(generate(TrafficSpec(seed=12, n_users=400, malformed_rate=0.01)))
    assert [r.value for r in other[:1000]] != [r.value for r in records[:1000]]


def test_disorder_is_bounded_per_topic_but_present(records):
    displaced = 0
    for topic in (TOPIC_EVENTS, TOPIC_ACTIVATIONS):
        highest = None
        for record in (r for r in records if r.topic == topic):
            if highest is not None:
                assert record.ts >= highest - SPEC.disorder_ms
                displaced += record.ts < highest
            highest = record.ts if highest is None else max(highest, record.ts)
    assert displaced > 1000
    assert SPEC.disorder_ms == SPEC.lateness_ms // 2


def test_disorder_must_stay_below_lateness():
    with pytest.raises(ValueError, match="lateness"):
        TrafficSpec(lateness_ms=1000, disorder_ms=1000)


def _malformed_kind(value: bytes | None, fields: tuple[str, ...]) -> str:
    if value is None:
        return "null_value"
    try:
        obj = orjson.loads(value)
    except orjson.JSONDecodeError:
        return "not_json"
    if isinstance(obj, list):
        return "json_array"
    if any(name not in obj for name in fields):
        return "missing_field"
    if isinstance(obj["ts"], str):
        return "ts_string"
    assert isinstance(obj["user_id"], float)
    return "user_id_float"


def test_every_malformed_kind_in_both_topics_and_only_those_are_rejected(records):
    for topic, spec in ((TOPIC_EVENTS, EVENT), (TOPIC_ACTIVATIONS, ACTIVATION)):
        kinds = set()
        for record in (r for r in records if r.topic == topic):
            if record.kind == MALFORMED:
                kinds.add(_malformed_kind(record.value, spec.field_names))
                with pytest.raises(RecordError):
                    spec.decode(record.value)
                assert record.key is not None
            else:
                user_id = spec.decode(record.value)[0]
                assert record.key == str(user_id)
        assert kinds == set(MALFORMED_KINDS), topic


def _events(records, kinds=(GOOD, DUPLICATE, SPAM)):
    for record in records:
        if record.topic == TOPIC_EVENTS and record.kind in kinds:
            yield orjson.loads(record.value)


def test_spammers_exceed_the_hourly_cap_in_critical_events(records):
    per_hour = Counter(
        (e["user_id"], e["ts"] // HOUR)
        for e in _events(records)
        if e["event_type"] in SPEC.critical_event_types
    )
    for spammer in SPEC.spammer_ids:
        hours = [n for (user, _), n in per_hour.items() if user == spammer]
        assert hours and min(hours) > SPEC.cap_per_user_hour
    ordinary = [n for (user, _), n in per_hour.items() if user not in SPEC.spammer_ids]
    assert max(ordinary) < SPEC.cap_per_user_hour


def test_duplicates_are_exact_resends(records):
    counts = Counter(r.value for r in records if r.kind in (GOOD, DUPLICATE))
    duplicates = [r for r in records if r.kind == DUPLICATE]
    assert len(duplicates) > 100
    assert all(counts[r.value] >= 2 for r in duplicates)
    assert {r.topic for r in duplicates} == {TOPIC_EVENTS, TOPIC_ACTIVATIONS}


def test_equal_timestamps_of_distinct_types_and_boundaries(records):
    types_at = defaultdict(set)
    for e in _events(records, (GOOD,)):
        types_at[(e["user_id"], e["ts"])].add(e["event_type"])
    assert sum(len(types) > 1 for types in types_at.values()) > 100
    on_window = sum(ts % SPEC.window_ms == 0 for _, ts in types_at)
    assert on_window > 10
    seen_types = {t for types in types_at.values() for t in types}
    assert seen_types == set(SPEC.event_types)
    assert {"scroll", "hover"} <= seen_types - set(SPEC.critical_event_types)


def test_events_may_precede_their_users_first_activation(records):
    first_activation: dict[int, tuple[int, int]] = {}  # user -> (position, ts)
    for position, record in enumerate(records):
        if record.topic == TOPIC_ACTIVATIONS and record.kind == GOOD:
            user = orjson.loads(record.value)["user_id"]
            first_activation.setdefault(user, (position, record.ts))
    early = 0
    for position, record in enumerate(records):
        if record.topic == TOPIC_EVENTS and record.kind == GOOD:
            user = int(record.key)
            if user in first_activation:
                act_position, act_ts = first_activation[user]
                early += position < act_position and record.ts >= act_ts
    assert early > 0


def test_memberships_overlap_and_some_users_have_none(records):
    experiments_of = defaultdict(set)
    for record in records:
        if record.topic == TOPIC_ACTIVATIONS and record.kind == GOOD:
            a = orjson.loads(record.value)
            experiments_of[a["user_id"]].add(a["experiment_hash"])
            groups = {a["experiment_group"]}
            assert groups <= {"control", "treatment"}
    assert any(len(exps) > 1 for exps in experiments_of.values())
    assert len(experiments_of) < SPEC.n_users
    assert any(e.startswith("exp_unramped") for exps in experiments_of.values() for e in exps)


def test_ramps_cover_the_three_validation_cases():
    rows = SPEC.ramp_rows()
    assert all(tuple(row) == RAMPS_HEADER for row in rows)
    periods = periods_of(rows, SPEC.period_ms)
    by_group = periods.groupby(["experiment_hash", "experiment_group"])["period_start"].apply(list)
    ramp_ups = Counter()
    for (exp, _), starts in by_group.items():
        ramp_ups[exp.split("_", 1)[1]] = max(ramp_ups[exp.split("_", 1)[1]], len(starts))
    assert ramp_ups == {"single": 1, "multi": 1, "reramp": 2, "edge": 2}
    multi_rows = [r for r in rows if r["experiment_hash"] == "exp2_multi"]
    assert sum(r["allocation_pct"] > 0 for r in multi_rows) >= 6  # several ramp-ups, 1 period
    end = SPEC.start_ms + SPEC.duration_ms
    for (_, _), starts in by_group.items():
        assert all(SPEC.start_ms <= s and s + SPEC.period_ms <= end for s in starts)
        assert all(b >= a + SPEC.period_ms for a, b in itertools.pairwise(starts))
    edge = by_group[("exp4_edge", "control")]
    assert edge[1] == edge[0] + SPEC.period_ms  # re-ramp exactly at the period end
    looped = periods_of(SPEC.ramp_rows(cycles=2), SPEC.period_ms)
    assert len(looped) == 2 * len(periods)


def test_first_ramp_up_is_the_earliest_row_above_zero():
    rows = SPEC.ramp_rows()
    first = first_ramp_up_ms(SPEC)
    assert any(r["ramp_ts"] == first and r["allocation_pct"] > 0 for r in rows)
    assert all(r["allocation_pct"] == 0 for r in rows if r["ramp_ts"] < first)
    assert any(r["ramp_ts"] < first for r in rows)  # the multi case's 0 % row comes first


def test_ramps_csv(tmp_path):
    path = write_ramps_csv(SPEC, tmp_path / "ramps.csv")
    lines = path.read_text().splitlines()
    assert lines[0] == ",".join(RAMPS_HEADER)
    assert len(lines) == len(SPEC.ramp_rows()) + 1
    assert {line.rsplit(",", 1)[1] for line in lines[1:]} == {"true", "false"}


def test_treatment_effect_visible_in_raw_rates(records):
    group_of = {}
    for record in records:
        if record.topic == TOPIC_ACTIVATIONS and record.kind == GOOD:
            a = orjson.loads(record.value)
            group_of[(a["user_id"], a["experiment_hash"])] = a["experiment_group"]
    clicks = Counter(e["user_id"] for e in _events(records, (GOOD,)) if e["event_type"] == "click")
    per_group = defaultdict(list)
    for (user, exp), group in group_of.items():
        if user not in SPEC.spammer_ids and exp in SPEC.experiments:
            per_group[group].append(clicks[user])
    mean = {g: sum(v) / len(v) for g, v in per_group.items()}
    assert mean["treatment"] > 1.1 * mean["control"]


def test_from_settings_uses_the_pipeline_config():
    settings = load_settings(
        environ={},
        overrides={
            "experiments": {
                "period": "30m",
                "window": "5m",
                "lateness": "2m",
                "cap_per_user_hour": 50,
            }
        },
    )
    spec = TrafficSpec.from_settings(settings.experiments, n_users=10)
    assert (spec.period_ms, spec.window_ms, spec.lateness_ms) == (1_800_000, 300_000, 120_000)
    assert spec.disorder_ms == 60_000 and spec.spam_events_per_hour == 100
    assert (
        spec.experiment_settings().critical_event_types == settings.experiments.critical_event_types
    )


class FakeProducer:
    """Records produce() calls; delivery callbacks fire on poll/flush, failing if asked to."""

    def __init__(self, fail: bool = False) -> None:
        self.sent: list[tuple] = []
        self.pending: list = []
        self.fail = fail

    def produce(self, topic, value=None, key=None, on_delivery=None):
        self.sent.append((topic, key, value))
        self.pending.append(on_delivery)

    def poll(self, timeout=0):
        pending, self.pending = self.pending, []
        for callback in pending:
            callback("broker down" if self.fail else None, None)
        return len(pending)

    def flush(self, timeout=None):
        self.poll()
        return 0


SMALL = TrafficSpec(seed=5, n_users=30, duration_ms=20 * 60_000, n_spammers=1, malformed_rate=0.02)


def test_produce_sends_everything_in_order_and_reports_kinds():
    fake = FakeProducer()
    report = produce(SMALL, load_settings(environ={}), progress=False, producer=fake)
    expected = list(generate(SMALL))
    assert fake.sent == [(r.topic, r.key, r.value) for r in expected]
    assert report.counts == tally(expected).counts
    assert report.total(kind=MALFORMED) > 0 and report.total(TOPIC_EVENTS, SPAM) > 0


def test_traffic_from_a_point_is_the_rest_of_the_same_traffic():
    whole = list(generate(SMALL, cycles=2))
    start = SMALL.start_ms + 7 * 60_000 + 123  # inside the second 5-minute chunk
    later = list(generate(SMALL, cycles=2, from_ms=start))
    assert later == [r for r in whole if r.ts >= start]
    assert 0 < len(later) < len(whole)
    fake = FakeProducer()
    report = produce(SMALL, load_settings(environ={}), progress=False, producer=fake,
                     from_ms=start)
    assert fake.sent == [(r.topic, r.key, r.value) for r in later[: len(fake.sent)]]
    assert report.total() == len(fake.sent) == len(list(generate(SMALL, from_ms=start)))


def test_produce_counts_its_messages_on_the_open_progress_display():
    shown, hidden = StepRecorder(), StepRecorder()
    with recording(shown):
        report = produce(SMALL, load_settings(environ={}), producer=FakeProducer())
    with recording(hidden):
        produce(SMALL, load_settings(environ={}), progress=False, producer=FakeProducer())
    assert shown.counted == report.total() > 0 and hidden.counted == 0


def test_produce_raises_on_delivery_failure():
    with pytest.raises(GenerationError, match="broker down"):
        produce(SMALL, load_settings(environ={}), progress=False, producer=FakeProducer(True))


def test_loop_mode_advances_event_time_at_the_rate_until_stopped():
    settings = load_settings(environ={})
    paced = run_for(SMALL, settings, 0.5, rate=4000, progress=False, producer=FakeProducer())
    assert 1000 <= paced.total() <= 2600
    stopped = threading.Event()
    stopped.set()
    kwargs = {"progress": False, "loop": True, "stop_event": stopped}
    assert produce(SMALL, settings, producer=FakeProducer(), **kwargs).total() == 0

    fast = FakeProducer()
    run_for(SMALL, settings, 0.3, progress=False, producer=fast)
    two_cycles = list(generate(SMALL, cycles=2))
    assert len(fast.sent) > len(two_cycles)
    assert fast.sent[: len(two_cycles)] == [(r.topic, r.key, r.value) for r in two_cycles]
    second = two_cycles[len(list(generate(SMALL))) :]
    end = SMALL.start_ms + SMALL.duration_ms
    assert end <= min(r.ts for r in second) <= max(r.ts for r in second) < end + SMALL.duration_ms
