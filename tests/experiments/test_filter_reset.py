"""A filter job whose checkpoint is deleted while its topic holds data replays the topic (its
capping state is rebuilt), delivers nothing twice, and goes on delivering new records."""

from __future__ import annotations

import json
import shutil

import pytest

from spark_jobs.streaming.kafka.producer import make_producer, produce_all
from spark_jobs.streaming.kafka.topic_admin import end_offsets, ensure_topics
from spark_jobs.streaming.lake.delta import read_arrow

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.kafka]

M = 60_000
BASE = 1_767_225_600_000  # 2026-01-01T00:00:00Z
COORDINATES = ["topic", "partition", "offset"]


def _produce(settings, records: list[dict | str]) -> None:
    ensure_topics(settings.kafka, ["events"], settings.kafka.partitions)
    keys = [str(r["user_id"]) if isinstance(r, dict) else "1" for r in records]
    values = [json.dumps(r) if isinstance(r, dict) else r for r in records]
    produce_all(make_producer(settings.kafka), "events", keys, values)


def _coordinates(frame) -> list[tuple]:
    return sorted(map(tuple, frame[COORDINATES].values.tolist()))


def _outputs(settings) -> tuple:
    raw = read_arrow(settings.lake.table("raw_events")).to_pandas()
    dead = read_arrow(settings.lake.table("dead_letters")).to_pandas()
    published = sum(end_offsets(settings.kafka, "filtered_events").values())
    return raw, dead, published


def test_filter_events_checkpoint_reset_delivers_nothing_twice(own_broker, make_settings,
                                                               run_now):
    settings = make_settings(own_broker, experiments={"cap_per_user_hour": 3, "lateness": "1m"},
                             jobs={"max_records_per_trigger": 4})
    first = [{"user_id": u, "event_type": "click", "ts": BASE + i * M}
             for i in range(5) for u in (1, 2)]  # user-hours hold 5: the cap keeps 3
    late = {"user_id": 1, "event_type": "click", "ts": BASE}  # behind the watermark by then
    _produce(settings, [*first, "not json", late])
    run_now(settings, "filter_events")
    raw, dead, published = _outputs(settings)
    assert len(raw) == 6 and published == 6
    assert len(dead) == 2 and (dead.reason == "late").sum() == 1  # and "not json"

    shutil.rmtree(settings.lake.checkpoint("filter_events"))
    run_now(settings, "filter_events")
    again, dead_again, published_again = _outputs(settings)
    assert _coordinates(again) == _coordinates(raw)
    assert len(dead_again) == 2 and published_again == 6

    # the replay rebuilt the capping state: the users' hour is full; a new user's is not
    _produce(settings, [{"user_id": 1, "event_type": "save", "ts": BASE + 10 * M},
                        {"user_id": 3, "event_type": "save", "ts": BASE + 10 * M}])
    run_now(settings, "filter_events")
    raw, dead, published = _outputs(settings)
    assert sorted(raw.user_id) == [1, 1, 1, 2, 2, 2, 3]
    assert not raw.duplicated(COORDINATES).any() and published == 7 and len(dead) == 2
