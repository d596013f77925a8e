"""Chaos: training_samples SIGKILLed at random moments (before its first commit, inside its
sink's writes, between batches), restarted each time from its checkpoint, ends with the
outputs of an uninterrupted run of the same seeded input (the samples, orphans and dead
letters tables, the Avro training_samples topic): nothing lost, nothing doubled. The samples
also agree with the independent batch recomputation (samples/shadow)."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator

import pytest
from helpers.chaos import assert_same_outputs, assert_unique, chaos_run, job_outputs
from helpers.jobs import run_available_now
from helpers.samples_day import produce_closed_day

from spark_jobs.contracts.topics import TOPIC_TRAINING_SAMPLES
from spark_jobs.local.broker import EmbeddedBroker
from spark_jobs.samples.encoding.sample_avro import decode_sample
from spark_jobs.samples.shadow.run import compare_day
from spark_jobs.samples.traffic import SamplesTrafficSpec
from spark_jobs.settings import Settings

pytestmark = [pytest.mark.chaos, pytest.mark.e2e, pytest.mark.spark, pytest.mark.kafka]

DAY = datetime.date(2026, 1, 1)
VIEWS = 700
SECTIONS = {
    "samples": {"window": "20s", "lateness": "5s"},
    # small triggers: five or more batches, so that three kills and the end fit
    "jobs": {"trigger": "200ms", "max_records_per_trigger": 150, "compact_every_batches": 2},
    "spark": {"master": "local[2]"},
}
DECODERS = {TOPIC_TRAINING_SAMPLES: decode_sample}


def _prepare(settings: Settings) -> set[str]:
    """The seeded traffic (disorder below the lateness: nothing late) and, last, a view of
    the next day whose event time closes every window; returns the day's view ids."""
    spec = SamplesTrafficSpec(users=80, posts=500, views_per_s=20, window_ms=20_000,
                              max_disorder_ms=4_000, seed=14)
    return produce_closed_day(settings, spec, views=VIEWS)


@pytest.fixture
def reference_settings(make_settings) -> Iterator[Settings]:
    with EmbeddedBroker(port=0) as broker:
        # the killed run's limit, so that the plans match while both topics have data (a
        # restart replays and plans them alike): an orphan's reason can depend on the
        # batches (README, known limits)
        settings = make_settings(broker.bootstrap, **SECTIONS)
        _prepare(settings)
        yield settings


def test_training_samples_survives_random_kills(spark, own_broker, make_settings,
                                                reference_settings, tmp_path):
    settings = make_settings(own_broker, **SECTIONS)
    views = _prepare(settings)

    report = chaos_run(settings, "training_samples", tmp_path, seed=5, kills=3,
                       timeout_s=600)

    assert {k.aim for k in report.kills} == {"startup", "sink_write", "between_batches"}
    run_available_now(spark, reference_settings, "training_samples")
    expected = job_outputs(reference_settings, "training_samples", DECODERS)
    actual = job_outputs(settings, "training_samples", DECODERS)
    assert_same_outputs(actual, expected)
    published = actual[f"topic {TOPIC_TRAINING_SAMPLES}"]
    assert_unique(published, TOPIC_TRAINING_SAMPLES,
                  lambda message: json.loads(message[1])["sample_id"])
    assert {json.loads(value)["sample_id"] for _, value in published} == views
    shadow = compare_day(spark, settings, DAY)
    assert shadow.agrees and shadow.batch_samples == len(views), shadow.as_dict()
