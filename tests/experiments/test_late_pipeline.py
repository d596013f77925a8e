"""End to end with late records and a stale snapshot, then a checkpoint reset (CONTRACTS §5, §9).

Real broker, real Spark, real Delta. A few minutes of event time, in phases:
A. activations and events of a first period; the snapshot knows only that period;
B. activations of a re-ramped group's second period, dropped: the snapshot is stale;
C. the re-ramp reaches the snapshot after the fact; later activations of that period count,
   and move experiment_metrics' watermark ahead of the events;
D. events that filter_events accepts but experiment_metrics finds late, and a few that
   filter_events itself finds late;
E. ordinary traffic.
The streaming table equals the batch recomputation on every closed window. Then the metrics
checkpoint is deleted while the topics hold everything: the new lineage is stopped after its
first commit, restarted (it must resume from its own rows, not the old lineage's newer ones)
and replays to a table that again equals the recomputation, with nothing doubled or missing.
"""

from __future__ import annotations

import datetime
import json
import random
import shutil
import time

import pandas as pd
import pytest
from helpers.jobs import run_available_now

from spark_jobs.experiments.admin.metadata import add_ramps
from spark_jobs.experiments.admin.snapshot import publish_snapshot
from spark_jobs.experiments.core.metrics import METRIC_COLUMNS
from spark_jobs.experiments.core.periods import RampRow
from spark_jobs.experiments.jobs.experiment_metrics import COMMIT_APP, COMMIT_WINDOW
from spark_jobs.experiments.recompute.recompute import recompute_day
from spark_jobs.local.broker import EmbeddedBroker
from spark_jobs.settings import load_settings
from spark_jobs.streaming.checkpoint import committed_watermark_ms, query_id
from spark_jobs.streaming.kafka.producer import make_producer, produce_all
from spark_jobs.streaming.lake.delta import commit_metadata, read_arrow, transaction_version
from spark_jobs.streaming.runner import start_job

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.kafka]

M = 60_000
BASE = 1_767_225_600_000  # 2026-01-01T00:00:00Z
DAY = datetime.date(2026, 1, 1)
KEY = ["experiment_hash", "experiment_group", "period_start", "event_type", "window_end"]
VALUES = ["is_control", *METRIC_COLUMNS]
CONFIG = {
    "experiments": {"period": "40m", "window": "5m", "lateness": "1m", "dedup_ttl": "1m",
                    "cap_per_user_hour": 300},
    "jobs": {"max_records_per_trigger": 150, "trigger": "200ms"},
    "spark": {"master": "local[2]"},
}
USERS = range(1, 41)
TREATED = [u for u in USERS if u % 2]


def _group(user: int) -> str:
    return "treatment" if user % 2 else "control"


def _activation(user: int, ts: int) -> dict:
    return {"user_id": user, "experiment_hash": "x", "experiment_group": _group(user), "ts": ts}


def _events(rng: random.Random, users, since: int, until: int, n: int) -> list[dict]:
    """n events per user in [since, until), in event-time order (never late by themselves)."""
    events = [{"user_id": u, "event_type": rng.choice(("click", "save")),
               "ts": rng.randrange(since, until)} for u in users for _ in range(n)]
    events += rng.sample(events, len(events) // 10)  # re-sent copies: de-duplicated
    return sorted(events, key=lambda e: e["ts"])


def _produce(settings, topic: str, records: list[dict]) -> None:
    keys = [str(r["user_id"]) for r in records]
    values = [json.dumps(r) for r in records]
    produce_all(make_producer(settings.kafka), topic, keys, values)


def _run(spark, settings, *jobs: str) -> None:
    for job in jobs:
        run_available_now(spark, settings, job, 600)


def _streaming(settings) -> pd.DataFrame:
    frame = read_arrow(settings.lake.table("experiment_metrics")).to_pandas()
    return frame[KEY + VALUES].sort_values(KEY).reset_index(drop=True)


def _batch(spark, settings, until_ms: int) -> pd.DataFrame:
    """The day's recomputation, on the windows the streaming job has closed."""
    recompute_day(spark, settings, DAY)
    frame = read_arrow(settings.lake.table("batch_experiment_metrics")).to_pandas()
    frame = frame[frame.window_end <= until_ms]
    return frame[KEY + VALUES].sort_values(KEY).reset_index(drop=True)


def _dead(settings, job: str) -> pd.DataFrame:
    dead = read_arrow(settings.lake.table("dead_letters")).to_pandas()
    return dead[dead.job == job]


@pytest.fixture(scope="module")
def late_lake(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("late")
    rng = random.Random(14)
    with EmbeddedBroker(port=0) as broker:
        settings = load_settings(environ={}, overrides={
            **CONFIG, "kafka": {"bootstrap": broker.bootstrap},
            "lake": {"root": str(root / "lake")}})
        url = settings.metadata.url
        add_ramps(url, [RampRow("x", "control", BASE, 50.0, True),
                        RampRow("x", "treatment", BASE, 50.0, False)])
        publish_snapshot(settings, BASE + 30 * M, None)
        # A: the first period
        _produce(settings, "experiment_activations",
                 sorted((_activation(u, BASE + rng.randrange(0, 20 * M)) for u in USERS),
                        key=lambda a: a["ts"]))
        _produce(settings, "events", _events(rng, USERS, BASE, BASE + 30 * M, 6))
        _run(spark, settings, "filter_events", "filter_activations", "experiment_metrics")
        # B: the treatment re-ramps at 45m, but the snapshot does not know yet
        dropped = [_activation(u, BASE + rng.randrange(50 * M, 55 * M)) for u in TREATED]
        _produce(settings, "experiment_activations", sorted(dropped, key=lambda a: a["ts"]))
        _run(spark, settings, "filter_activations")
        # C: the re-ramp reaches a snapshot published after the fact
        add_ramps(url, [RampRow("x", "treatment", BASE + 45 * M, 100.0, False)])
        publish_snapshot(settings, BASE + 60 * M, None)
        kept = [_activation(u, BASE + rng.randrange(55 * M, 62 * M)) for u in TREATED[:12]]
        _produce(settings, "experiment_activations", sorted(kept, key=lambda a: a["ts"]))
        _run(spark, settings, "filter_activations", "experiment_metrics")
        # D: events behind experiment_metrics' watermark, and a few behind filter_events' too
        _produce(settings, "events", [*_events(rng, USERS[:5], BASE + 5 * M, BASE + 10 * M, 1),
                                      *_events(rng, USERS, BASE + 30 * M, BASE + 62 * M, 4)])
        _run(spark, settings, "filter_events", "experiment_metrics")
        # E: ordinary traffic
        _produce(settings, "experiment_activations",
                 [_activation(u, BASE + 63 * M + u) for u in TREATED[12:]])
        _produce(settings, "events", _events(rng, USERS, BASE + 62 * M, BASE + 80 * M, 4))
        _run(spark, settings, "filter_events", "filter_activations", "experiment_metrics")
        yield settings


def test_streaming_equals_batch_with_late_records_and_a_stale_snapshot(spark, late_lake):
    settings = late_lake
    late = _dead(settings, "experiment_metrics")
    late = late[late.reason == "late"]
    raw = read_arrow(settings.lake.table("raw_events")).to_pandas()
    # the scenario is what it claims: late records the filter accepted ...
    assert len(late) > 20
    assert set(late.topic) == {"filtered_events"}
    # ... the filter's own late records never reach raw_events ...
    filter_late = _dead(settings, "filter_events")
    filter_late = filter_late[filter_late.reason == "late"]
    assert len(filter_late) >= 5
    coordinates = ["topic", "partition", "offset"]
    assert filter_late[coordinates].merge(raw[coordinates]).empty
    # ... and the stale snapshot dropped the re-ramped period's first activations
    activations = read_arrow(settings.lake.table("raw_activations")).to_pandas()
    assert not activations.ts.between(BASE + 50 * M, BASE + 55 * M - 1).any()
    watermark = committed_watermark_ms(settings.lake.checkpoint("experiment_metrics"))
    streaming = _streaming(settings)
    assert (streaming.period_start == BASE + 45 * M).any()
    assert len(streaming) > 30
    pd.testing.assert_frame_equal(streaming, _batch(spark, settings, watermark))


def _stop_after_first_commit(spark, settings) -> str:
    """Run the metrics job until its lineage committed metrics once, then stop it (its sink and
    the running totals it held are gone); returns the lineage's app id."""
    table = settings.lake.table("experiment_metrics")
    query, sink = start_job(spark, settings, "experiment_metrics")
    app_id = f"experiment_metrics@{query.id}"
    try:
        deadline = time.monotonic() + 600
        while transaction_version(table, app_id) is None:
            assert query.isActive, query.exception()
            assert time.monotonic() < deadline, "the metrics job made no progress"
            time.sleep(0.2)
    finally:
        query.stop()
        sink.close()
    return app_id


def test_a_checkpoint_reset_replays_to_the_batch_result(spark, late_lake):
    settings = late_lake
    checkpoint = settings.lake.checkpoint("experiment_metrics")
    before = _streaming(settings)
    shutil.rmtree(checkpoint)
    new = _stop_after_first_commit(spark, settings)
    first = commit_metadata(settings.lake.table("experiment_metrics"), COMMIT_APP, new)
    assert int(first[COMMIT_WINDOW]) < before.window_end.max()  # the old lineage got further
    _run(spark, settings, "experiment_metrics")  # resumes the new lineage from its own rows
    assert query_id(checkpoint) in new
    after = _streaming(settings)
    assert not after.duplicated(KEY).any()
    assert after[KEY].equals(before[KEY])  # nothing missing, nothing added
    watermark = committed_watermark_ms(checkpoint)
    pd.testing.assert_frame_equal(after, _batch(spark, settings, watermark))
