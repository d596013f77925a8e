"""training_samples forgets a view_id once the watermark passes its ts + samples.dedup_ttl, on
Spark's own state (MapState entries, the expiry lists and the bucket's event-time timer):
read back from the checkpoint, the de-duplication holds exactly the view_ids still within
the ttl, and one still remembered in a bucket whose other ids expired is still a duplicate."""

from __future__ import annotations

import datetime

import pytest
from helpers.topics import send

from spark_jobs.contracts.tables import TABLE_TRAINING_SAMPLES
from spark_jobs.contracts.topics import TOPIC_VIEWS
from spark_jobs.samples.shadow.compare import compare_samples, in_period
from spark_jobs.samples.shadow.run import batch_samples, streaming_samples
from spark_jobs.streaming.lake.delta import read_arrow

pytestmark = pytest.mark.integration

T0 = 1_767_225_600_000  # 2026-01-01
SECOND, MINUTE = 1_000, 60_000


def view(view_id: str, user: int, ts: int) -> dict:
    return {"view_id": view_id, "user_id": user, "post_id": 7, "ts": ts}


def remembered(spark, settings) -> set[str]:
    """The view_ids in the de-duplication's MapState at the last committed batch."""
    for operator in (0, 1):
        try:
            frame = (spark.read.format("statestore")
                     .option("path", settings.lake.checkpoint("training_samples"))
                     .option("operatorId", operator).option("stateVarName", "firsts").load())
            return {row[0] for row in frame.select("user_map_key.view_id").collect()}
        except Exception:  # the join's operator has no such state variable
            continue
    raise AssertionError("no operator holds the de-duplication's state")


def test_view_ids_are_forgotten_after_the_ttl_and_the_others_kept(
        own_broker, make_settings, run_now, spark):
    from spark_jobs.catalog import system_topics
    from spark_jobs.streaming.kafka.topic_admin import ensure_topics

    settings = make_settings(own_broker, samples={
        "window": "10s", "lateness": "1s", "dedup_ttl": "20s"})
    kafka = settings.kafka
    ensure_topics(kafka, system_topics("samples"), kafka.partitions)

    def duplicates(query) -> int:
        return sum(p.observedMetrics["training_samples"]["duplicate_views"]
                   for p in query.recentProgress if "training_samples" in p.observedMetrics)

    ids = [f"v{i}" for i in range(12)]  # 12 ids: some share a bucket with `clock`
    send(kafka, TOPIC_VIEWS, [(T0, view(v, 1 + i, T0 + i * SECOND)) for i, v in enumerate(ids)]
         + [(T0, view("clock", 99, T0 + 5 * MINUTE))], key="1")
    assert duplicates(run_now(settings, "training_samples")) == 0
    assert remembered(spark, settings) == {"clock"}  # the others' ts + 20 s is behind

    # clock again within the ttl: a duplicate; v0 again past its ttl: a new first arrival
    # (Kafka times in sending order: the batch recomputation orders arrivals by them)
    sent = T0 + SECOND
    send(kafka, TOPIC_VIEWS, [(sent, view("clock", 98, T0 + 5 * MINUTE + 2 * SECOND)),
                              (sent, view("v0", 97, T0 + 5 * MINUTE + 3 * SECOND)),
                              (sent, view("clock2", 99, T0 + 5 * MINUTE + 4 * SECOND))],
         key="2")
    assert duplicates(run_now(settings, "training_samples")) == 1
    assert remembered(spark, settings) == {"clock", "v0", "clock2"}

    send(kafka, TOPIC_VIEWS, [(T0 + 2 * SECOND, view("clock3", 99, T0 + 10 * MINUTE))],
         key="3")
    assert duplicates(run_now(settings, "training_samples")) == 0
    assert remembered(spark, settings) == {"clock3"}
    # v0 sent again past its ttl is a new view: its sample is kept beside the first one
    # (the table knows a sample by (sample_id, ts), as a consumer of the topic does)
    samples = read_arrow(settings.lake.table(TABLE_TRAINING_SAMPLES)).to_pylist()
    assert sorted((s["ts"], s["user_id"]) for s in samples if s["sample_id"] == "v0") == [
        (T0, 1), (T0 + 5 * MINUTE + 3 * SECOND, 97)]
    # and the daily shadow check agrees: the batch recomputation has both samples of v0
    # too (clock3's window is still open: only the samples before it are compared)
    day = datetime.date(2026, 1, 1)
    closed = (T0, T0 + 6 * MINUTE)
    report = compare_samples(in_period(streaming_samples(settings, day), *closed),
                             in_period(batch_samples(spark, settings, day), *closed),
                             settings.samples.signals)
    assert report.agrees and report.matched == 15, report.as_dict()
