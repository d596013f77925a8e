"""Property-based fuzzing of the experiment jobs' parsers and per-record paths (CONTRACTS 9).

Every input is either processed or rejected with a reason; no exception escapes:
- the four topics' RecordSpecs decode any bytes into their fields or raise RecordError
  (reason `malformed`, a detail);
- the processors' per-record steps and the pure state behind them (capping, per-user metrics,
  the window rows of the sink, the period lookup) take decoded but extreme values (times at
  0 and at the largest accepted, int64 user ids, any event type, experiment hash or group)
  and give ok, a count or a dead letter with a reason, never `error`.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from helpers.hostile import hostile_messages, messages
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_jobs.contracts.records import (
    ACTIVATION,
    EVENT,
    FILTERED_ACTIVATION,
    FILTERED_EVENT,
    MAX_TIME_MS,
    RecordError,
    RecordSpec,
)
from spark_jobs.experiments.core.capping import HourlyCap
from spark_jobs.experiments.core.group_windows import GroupWindows
from spark_jobs.experiments.core.periods import PeriodIndex, RampRow, periods
from spark_jobs.experiments.core.user_metrics import MetricParams, UserMetricsState
from spark_jobs.experiments.processors.cap_processor import HourlyCapProcessor
from spark_jobs.experiments.processors.metrics_processor import (
    SOURCE_ACTIVATION,
    SOURCE_EVENT,
    UserMetricsProcessor,
)

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
INT64 = (-(2**63), 2**63 - 1)
BASE = 1_767_225_600_000
H = 3_600_000
PARAMS = MetricParams(period_ms=2 * H, window_ms=H // 4, dedup_ttl_ms=H)
CRITICAL = ("click", "save")

EVENT_RECORD = {"user_id": 42, "event_type": "click", "ts": BASE}
ACTIVATION_RECORD = {"user_id": 42, "experiment_hash": "exp_a", "experiment_group": "control",
                     "ts": BASE}
FILTERED_ACTIVATION_RECORD = {**ACTIVATION_RECORD, "group_ramp_time": BASE, "is_control": True}
TOPICS = [(EVENT, EVENT_RECORD), (FILTERED_EVENT, EVENT_RECORD), (ACTIVATION, ACTIVATION_RECORD),
          (FILTERED_ACTIVATION, FILTERED_ACTIVATION_RECORD)]


# -- parsers --------------------------------------------------------------------------------
def _decoded_or_refused(spec: RecordSpec, value: bytes | None) -> None:
    try:
        fields = spec.decode(value)
    except RecordError as refused:
        assert refused.reason == "malformed" and str(refused)
        return
    assert len(fields) == len(spec.fields)
    for value_, (name, kind) in zip(fields, spec.fields, strict=True):
        if kind in ("long", "time_ms"):
            assert type(value_) is int and INT64[0] <= value_ <= INT64[1], name
        if kind == "time_ms":
            assert 0 <= value_ <= MAX_TIME_MS
        if kind == "string":
            assert isinstance(value_, str) and value_
            value_.encode("utf-8")  # no lone surrogate reaches Arrow or a producer
        if kind == "bool":
            assert type(value_) is bool


@FUZZ
@given(st.data())
def test_every_topic_record_decodes_or_is_refused_as_malformed(data):
    for spec, record in TOPICS:
        _decoded_or_refused(spec, data.draw(messages(record, list(record)), label=spec.name))


def test_each_hostile_kind_is_refused_and_only_the_future_one_decodes():
    """The future record is valid JSON; the jobs' event-time check rejects it downstream."""
    for spec, record in TOPICS:
        for label, value, reason in hostile_messages(record, int_field="user_id",
                                                     string_field="experiment_hash"
                                                     if "experiment_hash" in record
                                                     else "event_type", time_field="ts"):
            if reason == "future":
                assert spec.decode(value)[spec.field_names.index("ts")] > record["ts"]
                continue
            try:
                spec.decode(value)
            except RecordError as refused:
                assert refused.reason == "malformed" and str(refused), label
            else:
                raise AssertionError(f"{spec.name}: {label} decoded")


# -- per-record paths -----------------------------------------------------------------------
times = st.one_of(st.sampled_from([0, 1, H, BASE, MAX_TIME_MS - 1, MAX_TIME_MS]),
                  st.integers(0, MAX_TIME_MS))
names = st.one_of(st.sampled_from(CRITICAL), st.text(min_size=1, max_size=40),
                  st.just("x" * 5000))


@st.composite
def rows(draw: st.DrawFn) -> list[SimpleNamespace]:
    """One user's decoded rows of a batch: events and filtered activations, extreme values."""
    user = draw(st.integers(*INT64))
    out = []
    for offset in range(draw(st.integers(1, 8))):
        ts = draw(times)
        common = dict(kafka_topic="t", kafka_partition=0, kafka_offset=offset,
                      kafka_timestamp=draw(times), kafka_key=str(user), error=None,
                      raw_value=None, user_id=user, ts=ts)
        if draw(st.booleans()):
            out.append(SimpleNamespace(**common, source=SOURCE_EVENT, event_type=draw(names),
                                       experiment_hash=None, experiment_group=None,
                                       group_ramp_time=None, is_control=None))
        else:
            start = draw(st.one_of(st.just(ts), times))
            out.append(SimpleNamespace(**common, source=SOURCE_ACTIVATION, event_type=None,
                                       experiment_hash=draw(names), experiment_group=draw(names),
                                       group_ramp_time=start, is_control=draw(st.booleans())))
    return out


def _kinds(out: list[Any], allowed: set[str]) -> None:
    for row in out:
        assert row.kind in {"ok", "dead", "dropped"}
        if row.kind == "dead":
            assert row.reason in allowed and row.detail, (row.reason, row.detail)


def _fits_a_timer(ms: int | None) -> None:
    assert ms is None or 0 <= ms < 2**63


@FUZZ
@given(rows(), times, st.integers(1, 5))
def test_capping_takes_any_decoded_event(batch, watermark, cap):
    events = [r for r in batch if r.source == SOURCE_EVENT] or batch[:1]
    processor, counters = HourlyCapProcessor(cap), HourlyCap(cap)
    out = list(processor.cap_rows(counters, events, watermark))
    _kinds(out, {"late"})
    passed = sum(r.kind != "dropped" for r in out) + sum(r.dropped for r in out
                                                           if r.kind == "dropped")
    assert passed == len(events)  # each event is passed on, dead or counted, once
    _fits_a_timer(counters.next_wakeup())
    again = HourlyCap.from_bytes(cap, counters.to_bytes())
    again.expire(MAX_TIME_MS + H)
    assert again.is_empty()


@FUZZ
@given(rows(), times, times)
def test_user_metrics_take_any_decoded_record(batch, watermark, later):
    processor, user = UserMetricsProcessor(PARAMS), UserMetricsState(PARAMS)
    out = list(processor.user_rows(user, batch, watermark))
    _kinds(out, {"late", "malformed"})
    _fits_a_timer(user.next_wakeup())
    user = UserMetricsState.from_bytes(PARAMS, user.to_bytes())
    windows = GroupWindows(PARAMS.period_ms, PARAMS.window_ms, CRITICAL)
    for watermark_ms in sorted({watermark, later, MAX_TIME_MS + PARAMS.period_ms + H}):
        deltas = user.advance(watermark_ms)
        for delta in deltas:
            assert 0 <= delta.window_end < 2**63 and min(delta.counts) >= 0
        for row in windows.apply(deltas, watermark_ms):
            assert 0 <= row.window_end < 2**63 and row.event_type in CRITICAL
        _fits_a_timer(user.next_wakeup())
    assert user.is_empty()  # past every period and TTL nothing is kept


@FUZZ
@given(st.lists(st.tuples(names, names, times, st.floats(-1, 101), st.booleans()), max_size=6),
       names, names, times)
def test_the_period_lookup_takes_any_ramp_and_activation(ramps, experiment, group, ts):
    index = PeriodIndex(periods([RampRow(*ramp) for ramp in ramps], PARAMS.period_ms))
    found = index.find(experiment, group, ts)
    assert found is None or (found.group == (experiment, group) and found.contains(ts))
