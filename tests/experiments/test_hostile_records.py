"""One record at a time through the experiment processors (CONTRACTS section 9), without Spark:
a record that raises is an `error` dead letter with the exception's text and leaves the key's
state as it was, the key's other records go on, and what is filtered out by design (capped,
duplicate) is counted, one `dropped` row per reason."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pyarrow as pa

from spark_jobs.experiments.core.capping import HourlyCap
from spark_jobs.experiments.core.user_metrics import MetricParams, UserMetricsState
from spark_jobs.experiments.jobs.activation_batch import future_details
from spark_jobs.experiments.processors.cap_processor import HourlyCapProcessor
from spark_jobs.experiments.processors.metrics_processor import (
    SOURCE_ACTIVATION,
    SOURCE_EVENT,
    UserMetricsProcessor,
)
from spark_jobs.streaming.event_time import FUTURE_COLUMN

H = 3_600_000
PARAMS = MetricParams(period_ms=10 * H, window_ms=H, dedup_ttl_ms=H)


def source_row(offset: int, **fields: Any) -> SimpleNamespace:
    """A row of the Kafka source as a processor sees it (decoded fields plus coordinates)."""
    base = dict(kafka_topic="events", kafka_partition=0, kafka_offset=offset,
                kafka_timestamp=5 * H, kafka_key="7", error=None, raw_value=None, user_id=7)
    return SimpleNamespace(**{**base, **fields})


def event(offset: int, ts: Any, event_type: str = "click") -> SimpleNamespace:
    return source_row(offset, source=SOURCE_EVENT, event_type=event_type, ts=ts,
                      experiment_hash=None, experiment_group=None, group_ramp_time=None,
                      is_control=None)


def activation(offset: int, ts: int, start: Any = 0) -> SimpleNamespace:
    return source_row(offset, source=SOURCE_ACTIVATION, event_type=None, ts=ts,
                      experiment_hash="exp", experiment_group="g", group_ramp_time=start,
                      is_control=False)


def summary(rows: list[Any]) -> list[tuple[Any, ...]]:
    return [(r.kind, r.offset, r.reason, r.dropped) for r in rows]


def test_a_record_that_raises_is_an_error_dead_letter_and_the_cap_goes_on():
    processor = HourlyCapProcessor(cap=2)
    counters = HourlyCap(2)
    rows = [event(0, H), event(1, None), event(2, H + 1), event(3, H + 2), event(4, H + 3)]
    out = list(processor.cap_rows(counters, rows, watermark_ms=0))
    assert summary(out) == [("ok", 0, None, None), ("dead", 1, "error", None),
                            ("ok", 2, None, None), ("dropped", None, "capped", 2)]
    error = out[1]
    assert error.detail.startswith("TypeError: ") and "NoneType" in error.detail
    assert (error.topic, error.partition, error.key, error.user_id) == ("events", 0, "7", 7)
    assert counters.counts == {1: 2}  # the failed record took no room in its hour


def test_late_and_undecodable_events_are_dead_letters_with_a_detail():
    processor = HourlyCapProcessor(cap=5)
    undecodable = event(1, None, event_type=None)
    undecodable.error, undecodable.raw_value = "not valid JSON", "{x"
    rows = [event(0, H - 1), undecodable]
    late, bad = processor.cap_rows(HourlyCap(5), rows, watermark_ms=H)
    assert (late.reason, late.detail) == ("late", f"event time {H - 1} is 1 ms behind the "
                                                  f"watermark {H}")
    assert late.raw_value == '{"user_id":7,"event_type":"click","ts":3599999}'
    assert (bad.reason, bad.detail, bad.raw_value) == ("malformed", "not valid JSON", "{x")


def test_metrics_records_that_raise_leave_the_user_state_unchanged():
    processor = UserMetricsProcessor(PARAMS)
    user = UserMetricsState(PARAMS)
    rows = [activation(0, H), event(1, 2 * H), activation(2, H, start=None), event(3, None),
            event(4, 2 * H), event(5, 2 * H), event(6, 3 * H)]
    out = list(processor.user_rows(user, rows, watermark_ms=0))
    assert summary(out) == [("dead", 2, "error", None), ("dead", 3, "error", None),
                            ("dropped", None, "duplicate", 2)]
    assert all(r.detail.startswith("TypeError: ") for r in out[:2])
    assert sorted(user.pending) == [(2 * H, "click"), (3 * H, "click")]
    assert list(user.memberships) == [("exp", "g", 0)]
    again = UserMetricsState.from_bytes(PARAMS, user.to_bytes())  # the state still persists
    assert again.pending == user.pending and list(again.seen) == list(user.seen)


def test_an_activation_outside_the_period_it_names_is_malformed():
    processor = UserMetricsProcessor(PARAMS)
    rows = [activation(0, 11 * H, start=0), activation(1, 5, start=10)]
    outside, before = processor.user_rows(UserMetricsState(PARAMS), rows, watermark_ms=0)
    assert (outside.reason, outside.detail) == (
        "malformed", f"activation ts {11 * H} is outside the period [0, {10 * H}) that its "
                     f"group_ramp_time starts")
    assert before.reason == "malformed" and "[10, " in before.detail
    late, = processor.user_rows(UserMetricsState(PARAMS), [event(2, 0)], watermark_ms=H)
    assert (late.reason, late.detail) == ("late", f"event time 0 is {H} ms behind the "
                                                  f"watermark {H}")


def test_a_future_activation_gets_its_detail_on_the_driver():
    table = pa.table({"kind": ["dead", "dead", "ok"], "detail": ["not valid JSON", None, None],
                      FUTURE_COLUMN: pa.array([None, 10 * 365 * 86_400_000, None], pa.int64())})
    out = future_details(table)
    assert out.column_names == ["kind", "detail"]
    assert out["detail"].to_pylist() == [
        "not valid JSON",
        "event time is 3650d ahead of its Kafka timestamp (more than jobs.max_clock_skew)",
        None]
