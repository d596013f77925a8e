"""A sink opens, before the first batch, the producer of a job that publishes (an idempotent
producer's id arrives about a second after it is created) and none for a job that does not."""

from __future__ import annotations

import pytest

from spark_jobs.experiments.jobs.experiment_metrics import MetricsSink
from spark_jobs.experiments.jobs.filter_events import FilteredEventsSink
from spark_jobs.samples.jobs.training_samples import TrainingSamplesSink

pytestmark = [pytest.mark.kafka]


def test_a_publishing_sink_opens_its_producer_when_warmed(own_broker, make_settings):
    sink = FilteredEventsSink(make_settings(own_broker))
    assert sink.outputs._producer is None
    sink.warm()
    assert sink.outputs._producer is not None
    sink.close()


def test_a_sink_that_publishes_nothing_opens_no_producer(own_broker, make_settings):
    sink = MetricsSink(make_settings(own_broker))
    sink.warm()
    assert sink.outputs._producer is None


def test_the_samples_sink_warms_its_own_producer(own_broker, make_settings):
    sink = TrainingSamplesSink(make_settings(own_broker))
    sink.warm()
    assert sink._producer is not None
    assert sink.outputs._producer is None
    sink.close()
