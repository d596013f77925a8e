"""The experiments system under hostile input, live (CONTRACTS section 9): through the real
broker, Spark and Delta. A burst of every hostile kind (helpers/hostile.py, a clock ten years
ahead included) goes first into each of the four input topics, then ordinary generated
traffic. experiment_metrics must equal the pandas reference of the ordinary traffic alone
(so the future records moved no watermark: nothing after them was late), `dead_letters`
must hold each hostile record once, with its reason and the bytes as sent, and each job's
progress report must count every record it filtered out, by reason.
"""

from __future__ import annotations

import json
from collections import Counter

import pandas as pd
import pytest
from helpers.hostile import hostile_messages
from helpers.jobs import run_available_now
from helpers.topics import wait_for
from reference.metrics_reference import recompute

from spark_jobs.experiments.admin.metadata import add_ramps
from spark_jobs.experiments.admin.snapshot import publish_snapshot
from spark_jobs.experiments.core.periods import RampRow
from spark_jobs.experiments.traffic import TrafficSpec, generate, produce
from spark_jobs.streaming.checkpoint import batch_watermark_ms
from spark_jobs.streaming.drops import read_totals
from spark_jobs.streaming.kafka.producer import make_producer, produce_all
from spark_jobs.streaming.kafka.topic_admin import ensure_topics
from spark_jobs.streaming.lake.delta import read_arrow
from spark_jobs.streaming.progress import ProgressFileListener, progress_dir

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.kafka]

HOUR = 3_600_000
MAX_MESSAGE_BYTES = 4096  # small, so the "huge message" can be produced
KEY = ["experiment_hash", "experiment_group", "period_start", "event_type", "window_end"]
VALUES = ["is_control", "triggered_users", "volume", "propensity", "volume_sum_squares"]
START = 1_767_225_600_000
EVENT = {"user_id": 424242, "event_type": "click", "ts": START}
ACTIVATION = {"user_id": 424242, "experiment_hash": "exp_0", "experiment_group": "control",
              "ts": START}
HOSTILE = {  # topic -> (a valid record, its string field); the job that reads the topic
    "events": (EVENT, "event_type", "filter_events"),
    "experiment_activations": (ACTIVATION, "experiment_hash", "filter_activations"),
    "filtered_events": (EVENT, "event_type", "experiment_metrics"),
    "filtered_experiment_activations": (
        {**ACTIVATION, "group_ramp_time": START, "is_control": True}, "experiment_hash",
        "experiment_metrics"),
}


def _hostile(topic: str) -> list[tuple[str, bytes | None, str]]:
    record, string_field, _ = HOSTILE[topic]
    return hostile_messages(record, int_field="user_id", string_field=string_field,
                            time_field="ts", max_message_bytes=MAX_MESSAGE_BYTES)


def _run_counting(spark, settings, job: str) -> tuple[int, dict[str, int], Counter[str]]:
    """Run the job with its progress reported as `tideline job run` does; its final
    watermark, its drop totals and the sum of its per-batch drops."""
    listener = ProgressFileListener(settings, job)
    spark.streams.addListener(listener)
    try:
        query = run_available_now(spark, settings, job, 600)
        wait_for(lambda: listener.terminated, timeout_s=120)  # the bus delivers late
    finally:
        spark.streams.removeListener(listener)
    history = (progress_dir(settings) / f"{job}.jsonl").read_text().splitlines()
    per_batch = sum((Counter(json.loads(line).get("drops", {})) for line in history),
                    Counter())
    watermark = batch_watermark_ms(settings.lake.checkpoint(job),
                                   query.lastProgress["batchId"])
    return watermark, read_totals(progress_dir(settings), job), per_batch


def test_hostile_records_are_dead_lettered_and_the_metrics_equal_the_reference(
    spark, own_broker, make_settings
):
    settings = make_settings(
        own_broker,
        experiments={"period": "40m", "window": "5m", "lateness": "1m", "dedup_ttl": "1m",
                     "cap_per_user_hour": 40},
        jobs={"max_message_bytes": MAX_MESSAGE_BYTES, "max_records_per_trigger": 2000},
    )
    ensure_topics(settings.kafka, list(HOSTILE), settings.kafka.partitions)
    producer = make_producer(settings.kafka)
    for topic in HOSTILE:  # the burst goes first
        values = [value for _, value, _ in _hostile(topic)]
        produce_all(producer, topic, ["hostile"] * len(values), values)
    producer.flush(30)
    spec = TrafficSpec.from_settings(settings.experiments, seed=3, duration_ms=HOUR,
                                     n_users=40, malformed_rate=0.0, start_ms=START)
    produce(spec, settings, progress=False)
    add_ramps(settings.metadata.url, [RampRow(**row) for row in spec.ramp_rows()])
    publish_snapshot(settings, START + HOUR, None)

    _, events_drops, events_batches = _run_counting(spark, settings, "filter_events")
    _, activation_drops, activation_batches = _run_counting(spark, settings,
                                                            "filter_activations")
    watermark, metrics_drops, metrics_batches = _run_counting(spark, settings,
                                                              "experiment_metrics")

    records = list(generate(spec))
    reference = recompute([r.value for r in records if r.topic == "events"],
                          [r.value for r in records if r.topic == "experiment_activations"],
                          spec.ramp_rows(), settings.experiments, watermark)
    expected = reference.metrics[KEY + VALUES].sort_values(KEY).reset_index(drop=True)
    actual = read_arrow(settings.lake.table("experiment_metrics")).to_pandas()
    actual = actual[KEY + VALUES].sort_values(KEY).reset_index(drop=True)
    assert len(expected) > 50 and (expected.volume > 0).any()
    pd.testing.assert_frame_equal(actual, expected.astype(actual.dtypes.to_dict()))

    dead = read_arrow(settings.lake.table("dead_letters")).to_pandas()
    assert not dead.duplicated(["topic", "partition", "offset"]).any()
    for topic, (_, _, job) in HOSTILE.items():
        letters = dead[dead.topic == topic]
        assert set(letters.job) == {job}
        got = Counter((r.reason, r.raw_bytes, None if pd.isna(r.raw_length) else r.raw_length)
                      for r in letters.itertuples())
        sent = Counter((reason, value, None if value is None else len(value))
                       for _, value, reason in _hostile(topic))
        assert got == sent, topic
        assert letters.detail.notna().all()
        future = letters[letters.reason == "future"].detail
        assert future.str.contains("ahead of its Kafka timestamp").all()

    stats = reference.stats
    hostile = Counter(reason for _, _, reason in _hostile("events"))  # same kinds everywhere
    assert stats["events_non_critical"] and stats["events_over_cap"]
    assert stats["activations_outside_periods"] and stats["events_duplicate"]
    assert events_drops == {**hostile, "non_critical_type": stats["events_non_critical"],
                            "capped": stats["events_over_cap"]}
    assert activation_drops == {**hostile,
                                "outside_period": stats["activations_outside_periods"]}
    metrics_hostile = {reason: 2 * n for reason, n in hostile.items()}  # two filtered topics
    assert metrics_drops == {**metrics_hostile, "duplicate": stats["events_duplicate"]}
    for totals, batches in ((events_drops, events_batches),
                            (activation_drops, activation_batches),
                            (metrics_drops, metrics_batches)):
        assert batches == Counter(totals)  # the per-batch counts add up to the totals
