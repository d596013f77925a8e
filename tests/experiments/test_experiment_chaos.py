"""Chaos: each experiments job SIGKILLed at random moments (before its first commit, inside
its sink's writes, between batches; filter_activations, whose start-up and sink machinery is
filter_events', inside its sink's writes only), restarted each time from its checkpoint,
ends with the reference's outputs: nothing lost, nothing doubled, on its tables and on its
topic.

The filters' reference is an uninterrupted run of the same seeded input on a broker of its
own (the topic names are fixed); the metrics job's is the independent pandas recomputation.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from helpers.chaos import (
    AIMS,
    assert_same_outputs,
    assert_unique,
    chaos_run,
    job_outputs,
    table_rows,
)
from helpers.jobs import run_available_now
from reference.metrics_reference import experiment_metrics as reference_metrics
from reference.metrics_reference import provisional_metrics

from spark_jobs.experiments.admin.metadata import add_ramps
from spark_jobs.experiments.admin.snapshot import publish_snapshot
from spark_jobs.experiments.core.periods import RampRow
from spark_jobs.experiments.traffic import GeneratedRecord, TrafficSpec, generate
from spark_jobs.local.broker import EmbeddedBroker
from spark_jobs.settings import Settings
from spark_jobs.streaming.checkpoint import committed_watermark_ms
from spark_jobs.streaming.kafka.producer import make_producer, produce_all
from spark_jobs.streaming.lake.delta import read_arrow

pytestmark = [pytest.mark.chaos, pytest.mark.e2e, pytest.mark.spark, pytest.mark.kafka]

MINUTE = 60_000
KEY = ["experiment_hash", "experiment_group", "period_start", "event_type", "window_end"]
LIVE_KEY = KEY[:-1]
VALUES = ["is_control", "triggered_users", "volume", "propensity", "volume_sum_squares"]
SECTIONS = {
    "experiments": {"period": "20m", "window": "5m", "lateness": "1m", "dedup_ttl": "1m",
                    "cap_per_user_hour": 40},
    # small triggers: four or more batches per job, so that three kills and the end fit
    "jobs": {"trigger": "200ms", "max_records_per_trigger": 200, "compact_every_batches": 2},
    "spark": {"master": "local[2]"},
}


@pytest.fixture(scope="module")
def traffic() -> tuple[TrafficSpec, list[GeneratedRecord]]:
    """40 minutes of seeded traffic from 20 users (duplicates, spammers, malformed)."""
    spec = TrafficSpec(seed=14, duration_ms=40 * MINUTE, n_users=20, n_experiments=3,
                       events_per_user_hour=45, activations_per_user=18,
                       period_ms=20 * MINUTE, window_ms=5 * MINUTE,
                       lateness_ms=MINUTE, cap_per_user_hour=40, n_spammers=1,
                       malformed_rate=0.01)
    return spec, list(generate(spec))


def _prepare(settings: Settings, spec: TrafficSpec, records: list[GeneratedRecord]) -> None:
    """The input on the settings' broker, Kafka timestamps following event time (so every
    broker holds the same bytes), and the ramps and snapshot in the settings' lake."""
    add_ramps(settings.metadata.url, [RampRow(**row) for row in spec.ramp_rows()])
    publish_snapshot(settings, spec.start_ms + spec.duration_ms, None)
    producer = make_producer(settings.kafka)
    clock = spec.start_ms
    stamped = []
    for record in records:
        clock = max(clock, record.ts or clock)
        stamped.append((record, clock))
    for topic in ("events", "experiment_activations"):
        mine = [(r, at) for r, at in stamped if r.topic == topic]
        produce_all(producer, topic, [r.key for r, _ in mine], [r.value for r, _ in mine],
                    [at for _, at in mine])


@pytest.fixture
def chaos_settings(own_broker, make_settings, traffic) -> Settings:
    settings = make_settings(own_broker, **SECTIONS)
    _prepare(settings, *traffic)
    return settings


@pytest.fixture
def reference_settings(make_settings, traffic) -> Iterator[Settings]:
    with EmbeddedBroker(port=0) as broker:
        # one batch: nothing is late in this traffic, so the batching changes no result
        settings = make_settings(broker.bootstrap, **{
            **SECTIONS, "jobs": {"max_records_per_trigger": 100_000}})
        _prepare(settings, *traffic)
        yield settings


def _filter_chaos(spark, job: str, chaos_settings: Settings, reference_settings: Settings,
                  folder: Path, seed: int, aims: tuple[str, ...] | None = None) -> None:
    report = chaos_run(chaos_settings, job, folder, seed=seed, kills=3, aims=aims,
                       timeout_s=600)
    assert {k.aim for k in report.kills} == set(aims or AIMS)
    run_available_now(spark, reference_settings, job)
    expected = job_outputs(reference_settings, job)
    actual = job_outputs(chaos_settings, job)
    assert sum(expected[f"topic {chaos_topic(job)}"].values()) > 200
    assert_same_outputs(actual, expected)
    assert_unique(actual["table dead_letters"], "dead_letters",
                  lambda row: dict(row)["offset"])


def chaos_topic(job: str) -> str:
    from spark_jobs.catalog import job as catalog_job

    return catalog_job(job).outputs[0]


def test_filter_events_survives_random_kills(spark, chaos_settings, reference_settings,
                                             tmp_path):
    _filter_chaos(spark, "filter_events", chaos_settings, reference_settings, tmp_path, 1)


def test_filter_activations_survives_random_kills(spark, chaos_settings, reference_settings,
                                                  tmp_path):
    """A kill inside its own sink's writes (raw_activations, its topic, dead_letters): the
    start-up and commit path it shares with filter_events (the runner, FilterSink) is
    killed at every aim in the test above; each more kill costs a JVM start."""
    _filter_chaos(spark, "filter_activations", chaos_settings, reference_settings, tmp_path,
                  2, aims=("sink_write",))


def _metrics(settings: Settings) -> pd.DataFrame:
    table = read_arrow(settings.lake.table("experiment_metrics")).to_pandas()
    return table[KEY + VALUES].sort_values(KEY).reset_index(drop=True)


def _live(settings: Settings) -> pd.DataFrame:
    table = read_arrow(settings.lake.table("experiment_metrics_provisional")).to_pandas()
    return table[LIVE_KEY + VALUES].sort_values(LIVE_KEY).reset_index(drop=True)


def test_experiment_metrics_survives_random_kills(spark, chaos_settings, traffic, tmp_path):
    """Both tables: the final windows, and the live totals (upserted once per batch that
    changes them, before the final rows: a replayed batch must not fold its records twice)."""
    spec, records = traffic
    run_available_now(spark, chaos_settings, "filter_events")
    run_available_now(spark, chaos_settings, "filter_activations")
    before = table_rows(chaos_settings, "dead_letters")

    report = chaos_run(chaos_settings, "experiment_metrics", tmp_path, seed=3, kills=3,
                       timeout_s=600)

    assert {k.aim for k in report.kills} == {"startup", "sink_write", "between_batches"}
    watermark = committed_watermark_ms(chaos_settings.lake.checkpoint("experiment_metrics"))
    inputs = ([r.value for r in records if r.topic == "events"],
              [r.value for r in records if r.topic == "experiment_activations"],
              spec.ramp_rows(), chaos_settings.experiments, watermark)
    expected = reference_metrics(*inputs)[KEY + VALUES].sort_values(KEY).reset_index(drop=True)
    actual = _metrics(chaos_settings)
    assert len(expected) > 50
    assert not actual.duplicated(KEY).any()
    pd.testing.assert_frame_equal(actual, expected.astype(actual.dtypes.to_dict()))
    live, expected_live = _live(chaos_settings), provisional_metrics(*inputs)
    assert not live.duplicated(LIVE_KEY).any() and (live.volume > 0).any()
    pd.testing.assert_frame_equal(live, expected_live.astype(live.dtypes.to_dict()))
    assert table_rows(chaos_settings, "dead_letters") == before, "nothing late, nothing bad"
