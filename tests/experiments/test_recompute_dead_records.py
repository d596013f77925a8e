"""The recomputation leaves out exactly the raw records experiment_metrics never counted: the
keys whose every copy it dead-lettered (matched on the decoded record, see dead_records.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from spark_jobs.contracts.tables import RAW_ACTIVATIONS, RAW_EVENTS
from spark_jobs.experiments.recompute.dead_records import (
    DEAD_COLUMNS,
    counted_activations,
    counted_events,
    lineage_dead_letters,
)

pytestmark = pytest.mark.spark

EVENTS = RAW_EVENTS.select("user_id", "event_type", "ts", "topic", "partition", "offset")
ACTIVATIONS = RAW_ACTIVATIONS.select(
    "user_id", "experiment_hash", "experiment_group", "group_ramp_time", "ts", "offset")


NOW = datetime(2026, 1, 2, tzinfo=UTC)


def _dead(job: str, topic: str, offset: int, record: dict | str, at: datetime = NOW) -> tuple:
    raw = record if isinstance(record, str) else json.dumps(record)
    return (job, topic, 0, offset, raw, at)


def test_a_key_is_left_out_only_when_every_copy_was_dead_lettered(spark):
    raw = spark.createDataFrame([
        (1, "click", 100, "events", 0, 10),   # dead once: left out
        (2, "click", 100, "events", 0, 11),   # two copies, one dead: the other was counted
        (2, "click", 100, "events", 0, 12),
        (3, "click", 100, "events", 0, 13),   # dead letter replayed after a reset: still one
        (3, "click", 100, "events", 0, 14),
        (4, "click", 100, "events", 0, 15),   # dead for another job only: kept
        (5, "save", 100, "events", 0, 16),    # a dead letter of another type: kept
    ], EVENTS.spark_schema())
    dead = spark.createDataFrame([
        _dead("experiment_metrics", "filtered_events", 1, {"user_id": 1, "event_type": "click",
                                                           "ts": 100}),
        _dead("experiment_metrics", "filtered_events", 2, {"user_id": 2, "event_type": "click",
                                                           "ts": 100}),
        *[_dead("experiment_metrics", "filtered_events", 3, {"user_id": 3, "event_type": "click",
                                                             "ts": 100})] * 2,
        _dead("filter_events", "events", 15, {"user_id": 4, "event_type": "click", "ts": 100}),
        _dead("experiment_metrics", "filtered_events", 5, {"user_id": 5, "event_type": "click",
                                                           "ts": 100}),
        _dead("experiment_metrics", "filtered_events", 6, "not json"),
    ], DEAD_COLUMNS.spark_schema())
    kept = sorted(r.offset for r in counted_events(raw, lineage_dead_letters(dead, None))
                  .collect())
    assert kept == [11, 12, 13, 14, 15, 16]


def test_activations_match_on_their_period_too(spark):
    raw = spark.createDataFrame([
        (1, "x", "treatment", 0, 50, 1),      # dead: left out
        (1, "x", "treatment", 40, 50, 2),     # same ts, another period (a newer snapshot): kept
        (2, "x", "treatment", 0, 50, 3),      # dead as an event, not an activation: kept
    ], ACTIVATIONS.spark_schema())
    record = {"user_id": 1, "experiment_hash": "x", "experiment_group": "treatment",
              "group_ramp_time": 0, "is_control": False, "ts": 50}
    dead = spark.createDataFrame([
        _dead("experiment_metrics", "filtered_experiment_activations", 7, record),
        _dead("experiment_metrics", "filtered_events", 8, {"user_id": 2, "ts": 50,
                                                           "event_type": "click"}),
    ], DEAD_COLUMNS.spark_schema())
    counted = counted_activations(raw, lineage_dead_letters(dead, None))
    assert sorted(r.offset for r in counted.collect()) == [2, 3]


def test_only_the_current_lineages_dead_letters_count(spark):
    """After a checkpoint reset the job decides again: the old lineage's `late` is history."""
    raw = spark.createDataFrame([(1, "click", 100, "events", 0, 10),
                                 (2, "click", 100, "events", 0, 11)], EVENTS.spark_schema())
    before = datetime(2026, 1, 1, tzinfo=UTC)
    dead = spark.createDataFrame([
        _dead("experiment_metrics", "filtered_events", 1,
              {"user_id": 1, "event_type": "click", "ts": 100}, before),
        _dead("experiment_metrics", "filtered_events", 2,
              {"user_id": 2, "event_type": "click", "ts": 100}, NOW),
    ], DEAD_COLUMNS.spark_schema())
    since = int(datetime(2026, 1, 1, 12, tzinfo=UTC).timestamp() * 1000)
    lineage = lineage_dead_letters(dead, since)
    assert [r.offset for r in counted_events(raw, lineage).collect()] == [10]
    everything = lineage_dead_letters(dead, None)
    assert counted_events(raw, everything).count() == 0
