"""Each streaming job against a real broker, real Spark and real Delta tables, on tiny data."""

from __future__ import annotations

import json
import shutil
import time

import pandas as pd
import pytest
from confluent_kafka import Consumer, TopicPartition

from spark_jobs.experiments.admin.metadata import add_ramps
from spark_jobs.experiments.admin.snapshot import publish_snapshot
from spark_jobs.experiments.core.periods import RampRow
from spark_jobs.streaming.kafka.client import client_config
from spark_jobs.streaming.kafka.producer import make_producer, produce_all
from spark_jobs.streaming.kafka.topic_admin import end_offsets, ensure_topics
from spark_jobs.streaming.lake.delta import read_arrow

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.kafka]

M = 60_000
BASE = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def _produce(settings, topic: str, records: list[dict | str | None]) -> None:
    ensure_topics(settings.kafka, [topic], settings.kafka.partitions)
    keys, values = [], []
    for record in records:
        user = record.get("user_id") if isinstance(record, dict) else 1
        keys.append(str(user))
        values.append(json.dumps(record) if isinstance(record, dict) else record)
    produce_all(make_producer(settings.kafka), topic, keys, values)


def _consume_all(settings, topic: str) -> list[tuple[str, dict]]:
    """Every record of the topic, read by exact offsets (no consumer-group join wait)."""
    ends = end_offsets(settings.kafka, topic)
    consumer = Consumer(client_config(settings.kafka, **{
        "group.id": f"t-{time.time_ns()}", "enable.auto.commit": False,
    }))
    consumer.assign([TopicPartition(topic, p, 0) for p in ends])
    out: list[tuple[str, dict]] = []
    deadline = time.monotonic() + 30
    while len(out) < sum(ends.values()) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None or message.error():
            continue
        out.append((message.key().decode(), json.loads(message.value())))
    consumer.close()
    return out


def _table(settings, name: str) -> pd.DataFrame:
    return read_arrow(settings.lake.table(name)).to_pandas()


def test_filter_events_keeps_critical_caps_spammers_and_routes_bad_records(
    own_broker, make_settings, run_now
):
    settings = make_settings(
        own_broker, experiments={"cap_per_user_hour": 3, "lateness": "1m"}
    )
    clicks = [{"user_id": 7, "event_type": "click", "ts": BASE + i * 1000, "pin": i}
              for i in range(5)]
    _produce(settings, "events", [
        *clicks,
        {"user_id": 7, "event_type": "scroll", "ts": BASE},          # not critical
        {"user_id": 7, "event_type": "save", "ts": BASE + 2 * 3_600_000},  # next hours: room
        {"user_id": 8, "event_type": "search", "ts": BASE + 10},
        "not json", None, '{"user_id": "8", "event_type": "click", "ts": 1}',
    ])
    run_now(settings, "filter_events")

    raw = _table(settings, "raw_events").sort_values(["user_id", "ts"])
    assert list(zip(raw.user_id, raw.event_type, raw.ts, strict=True)) == [
        (7, "click", BASE), (7, "click", BASE + 1000), (7, "click", BASE + 2000),
        (7, "save", BASE + 2 * 3_600_000), (8, "search", BASE + 10),
    ]
    published = _consume_all(settings, "filtered_events")
    assert sorted((k, v["ts"]) for k, v in published) == sorted(
        (str(u), t) for u, t in zip(raw.user_id, raw.ts, strict=True)
    )
    assert all(set(v) == {"user_id", "event_type", "ts"} for _, v in published)  # stripped

    dead = _table(settings, "dead_letters")
    assert set(dead.reason) == {"malformed"}
    assert sorted(dead.detail.str.split(":").str[0]) == [
        "empty message (null value)", "field 'user_id' must be an integer, got string",
        "not valid JSON",
    ]
    # the evidence is the bytes as received: the row's whole text, else read back by offset
    assert sorted(v for v in dead.raw_bytes if v is not None) == [
        b"not json", b'{"user_id": "8", "event_type": "click", "ts": 1}']
    assert sorted(int(n) for n in dead.raw_length.dropna()) == [8, 48]
    assert set(dead.job) == {"filter_events"}
    assert dead.offset.notna().all() and set(dead.topic) == {"events"}

    # a record behind the watermark (now max ts - 1m) is dead-lettered as late, not counted
    _produce(settings, "events", [{"user_id": 8, "event_type": "click", "ts": BASE}])
    run_now(settings, "filter_events")
    dead = _table(settings, "dead_letters")
    assert (dead.reason == "late").sum() == 1
    assert len(_table(settings, "raw_events")) == 5

    # a deleted checkpoint starts a new lineage: its batches are written, not skipped, but
    # what the old lineage delivered is not delivered twice (test_filter_reset.py); the new
    # lineage reads everything in one batch, where the late record is in time
    shutil.rmtree(settings.lake.checkpoint("filter_events"))
    run_now(settings, "filter_events")
    raw = _table(settings, "raw_events")
    assert len(raw) == 5 + 1 and not raw.duplicated(["topic", "partition", "offset"]).any()


def test_filter_activations_keeps_snapshot_periods_and_sees_new_snapshots(
    own_broker, make_settings, run_now
):
    settings = make_settings(own_broker, experiments={"period": "30m"})
    add_ramps(settings.metadata.url, [
        RampRow("exp_a", "control", BASE, 10, True),
        RampRow("exp_a", "treatment", BASE, 10, False),
    ])
    publish_snapshot(settings, BASE + 3_600_000, None)
    _produce(settings, "experiment_activations", [
        {"user_id": 1, "experiment_hash": "exp_a", "experiment_group": "treatment",
         "ts": BASE + 5 * M},
        {"user_id": 2, "experiment_hash": "exp_a", "experiment_group": "control",
         "ts": BASE + 29 * M},
        {"user_id": 3, "experiment_hash": "exp_a", "experiment_group": "control",
         "ts": BASE + 30 * M},  # period end is exclusive
        {"user_id": 4, "experiment_hash": "exp_b", "experiment_group": "control",
         "ts": BASE + 5 * M},  # not ramped
        {"user_id": 5, "experiment_hash": "exp_a", "experiment_group": "control",
         "ts": BASE - 1},  # before the ramp
        {"user_id": 6, "experiment_hash": "exp_a"},
    ])
    run_now(settings, "filter_activations")
    raw = _table(settings, "raw_activations").sort_values("user_id")
    assert list(raw.user_id) == [1, 2]
    assert list(raw.group_ramp_time) == [BASE, BASE]
    assert list(raw.is_control) == [False, True]
    published = {k: v for k, v in _consume_all(settings, "filtered_experiment_activations")}
    assert published["1"]["group_ramp_time"] == BASE and published["2"]["is_control"] is True
    dead = _table(settings, "dead_letters")
    assert list(dead.reason) == ["malformed"]
    assert list(dead.detail) == ["missing field 'experiment_group'"]

    # a new snapshot (exp_b ramped) is picked up by the next run of the job
    add_ramps(settings.metadata.url, [RampRow("exp_b", "control", BASE, 5, True)])
    publish_snapshot(settings, BASE + 3_600_000, None)
    _produce(settings, "experiment_activations", [
        {"user_id": 9, "experiment_hash": "exp_b", "experiment_group": "control",
         "ts": BASE + 6 * M},
    ])
    run_now(settings, "filter_activations")
    assert 9 in set(_table(settings, "raw_activations").user_id)


def test_experiment_metrics_counts_events_arriving_before_their_activation(
    own_broker, make_settings, run_now
):
    settings = make_settings(own_broker, experiments={
        "period": "30m", "window": "5m", "lateness": "1m", "dedup_ttl": "1m",
    })
    act = {"experiment_hash": "exp_a", "group_ramp_time": BASE}
    _produce(settings, "filtered_events", [
        {"user_id": 1, "event_type": "click", "ts": BASE + 1 * M},  # before first trigger
        {"user_id": 1, "event_type": "click", "ts": BASE + 3 * M},
        {"user_id": 1, "event_type": "click", "ts": BASE + 3 * M},  # duplicate
        {"user_id": 1, "event_type": "click", "ts": BASE + 8 * M},
        {"user_id": 2, "event_type": "save", "ts": BASE + 4 * M},   # before its activation
        {"user_id": 3, "event_type": "impression", "ts": BASE + 40 * M},
    ])
    _produce(settings, "filtered_experiment_activations", [
        {**act, "user_id": 1, "experiment_group": "treatment", "ts": BASE + 2 * M,
         "is_control": False},
        {**act, "user_id": 2, "experiment_group": "control", "ts": BASE + 3 * M + 30_000,
         "is_control": True},
        {**act, "user_id": 5, "experiment_group": "control", "ts": BASE + 25 * M,
         "is_control": True},
    ])
    run_now(settings, "experiment_metrics")

    metrics = _table(settings, "experiment_metrics")
    # one watermark over both topics: 40m - 1m => every window of the 30m period is closed
    assert sorted(set(metrics.window_end - BASE)) == [w * M for w in (5, 10, 15, 20, 25, 30)]
    assert len(metrics) == 2 * 6 * 4  # groups x windows x critical types, zeros included
    rows = metrics.set_index(["experiment_group", "event_type", "window_end"]).sort_index()
    treatment_click = rows.loc[("treatment", "click")]
    assert list(treatment_click.volume) == [1, 2, 2, 2, 2, 2]
    assert list(treatment_click.volume_sum_squares) == [1, 4, 4, 4, 4, 4]
    assert list(treatment_click.propensity) == [1] * 6
    control_save = rows.loc[("control", "save")]
    assert list(control_save.volume) == [1] * 6  # the event came before its activation
    assert list(control_save.triggered_users) == [1, 1, 1, 1, 1, 2]  # user 5 at 25m
    assert not metrics.duplicated(
        ["experiment_hash", "experiment_group", "period_start", "event_type", "window_end"]
    ).any()

    # late activation: behind the watermark, dead-lettered and not counted
    _produce(settings, "filtered_experiment_activations", [
        {**act, "user_id": 6, "experiment_group": "control", "ts": BASE + 1 * M,
         "is_control": True},
    ])
    run_now(settings, "experiment_metrics")
    dead = _table(settings, "dead_letters")
    assert list(dead.reason) == ["late"]
    after = _table(settings, "experiment_metrics").set_index(
        ["experiment_group", "event_type", "window_end"]
    ).sort_index()
    assert list(after.loc[("control", "save")].triggered_users) == [1, 1, 1, 1, 1, 2]


def test_filter_activations_alerts_once_when_its_snapshot_is_stale(
    own_broker, make_settings, run_now
):
    """CONTRACTS.md section 9: a snapshot older than 3 publish intervals (the publisher
    stopped) raises one alert, not one per batch; a fresh snapshot raises none."""
    from spark_jobs.experiments.admin.snapshot import PREFIX, snapshot_as_of

    settings = make_settings(own_broker, experiments={"period": "30m", "snapshot_interval": "1m"})
    add_ramps(settings.metadata.url, [RampRow("exp_a", "control", BASE, 10, True)])
    path = publish_snapshot(settings, BASE + 3_600_000, None)
    hour_ago_ns = time.time_ns() - 3_600 * 10**9  # published an hour ago: 60 intervals
    path.rename(path.with_name(f"{PREFIX}{hour_ago_ns:020d}_asof_{snapshot_as_of(path):015d}.csv"))
    activation = {"user_id": 1, "experiment_hash": "exp_a", "experiment_group": "control",
                  "ts": BASE + 5 * M}
    _produce(settings, "experiment_activations", [activation])
    run_now(settings, "filter_activations")
    _produce(settings, "experiment_activations", [{**activation, "user_id": 2}])
    run_now(settings, "filter_activations")  # a restart on the same stale snapshot
    alerts = _table(settings, "alerts")
    assert list(alerts.kind) == ["snapshot_stale"]
    assert set(alerts.source) == {"filter_activations"}
    assert list(_table(settings, "raw_activations").user_id.sort_values()) == [1, 2]

    publish_snapshot(settings, BASE + 3_600_000, None)  # the publisher is back
    _produce(settings, "experiment_activations", [{**activation, "user_id": 3}])
    run_now(settings, "filter_activations")
    assert len(_table(settings, "alerts")) == 1
