"""training_samples through the broker: every rule of CONTRACTS.md section 8 on handcrafted
records, Avro on the topic, the Delta sinks, and a stopped job resuming (a killed one:
test_samples_chaos.py)."""

from __future__ import annotations

import json
import re

import pytest
from deltalake import DeltaTable
from helpers.topics import send

from spark_jobs.contracts.tables import (
    TABLE_DEAD_LETTERS,
    TABLE_ORPHAN_ENGAGEMENTS,
    TABLE_TRAINING_SAMPLES,
)
from spark_jobs.contracts.topics import TOPIC_ENGAGEMENTS, TOPIC_TRAINING_SAMPLES, TOPIC_VIEWS
from spark_jobs.samples.encoding.sample_avro import decode_sample
from spark_jobs.streaming.kafka.topic_reader import read_all
from spark_jobs.streaming.lake.delta import read_arrow, table_exists

pytestmark = pytest.mark.integration

T0 = 1_767_225_600_000  # 2026-01-01
WINDOW = 600_000
SIGNALS = ("like", "share", "comment", "favorite", "play", "skip")


def view(view_id: str, user: int, post: int, ts: int, **context) -> dict:
    return {"view_id": view_id, "user_id": user, "post_id": post, "ts": ts, **context}


def engagement(user: int, post: int, signal: str, ts: int, view_id: str | None = None) -> dict:
    return {"user_id": user, "post_id": post, "view_id": view_id, "signal": signal, "ts": ts}


def labels(*on: str) -> dict[str, int]:
    return {s: int(s in on) for s in SIGNALS}


def sample(view_id: str, user: int, post: int, ts: int, context: dict, *on: str) -> dict:
    return {"sample_id": view_id, "view_id": view_id, "user_id": user, "post_id": post,
            "ts": ts, "context": json.dumps(context, separators=(",", ":")),
            "labels": labels(*on)}


def stored_samples(settings) -> list[dict]:
    rows = read_arrow(settings.lake.table(TABLE_TRAINING_SAMPLES)).to_pylist()
    return sorted(rows, key=lambda r: r["sample_id"])


def test_samples_orphans_dead_letters_and_the_topic(own_broker, make_settings, run_now):
    from spark_jobs.catalog import system_topics
    from spark_jobs.streaming.kafka.topic_admin import ensure_topics

    settings = make_settings(own_broker)
    kafka = settings.kafka
    ensure_topics(kafka, system_topics("samples"), kafka.partitions)
    # the engagement for v3 is in Kafka before v3 itself; v1 is delivered twice
    send(kafka, TOPIC_ENGAGEMENTS, [
        (T0, engagement(2, 20, "comment", T0 + 11_000, "v3")),
        (T0, engagement(1, 10, "like", T0 + 1_000, "v1")),
        (T0, engagement(1, 10, "like", T0 + 2_000, "v1")),  # the same signal twice: once
        (T0, engagement(1, 10, "share", T0 + 5_000)),  # null view_id: latest view, v2
        (T0, engagement(2, 20, "play", T0 + 10_000 + WINDOW, "v3")),  # window end: excluded
        (T0, engagement(2, 20, "skip", T0 + 20_000, "ghost")),  # its view never comes
        (T0, engagement(1, 11, "favorite", T0 + 1_500, "v1")),  # v1 is a view of post 10
        (T0, engagement(1, 10, "dislike", T0 + 1_500, "v1")),  # not a configured signal
        (T0, '{"user_id": "x", "post_id": 1, "signal": "like", "ts": 5}'),
    ], key="1")
    send(kafka, TOPIC_VIEWS, [
        (T0, view("v1", 1, 10, T0, surface="feed", position=1)),
        (T0, view("v2", 1, 10, T0 + 3_000, surface="feed", position=2)),
        (T0, view("v1", 1, 10, T0 + 9, surface="redelivered")),
        (T0, view("v3", 2, 20, T0 + 10_000, surface="search", lang="hi")),
        (T0, "not json"),
        (T0, view("clock", 3, 30, T0 + 3_600_000)),  # moves event time past every window
    ], key="1")
    query = run_now(settings, "training_samples")

    counted = [p.observedMetrics["training_samples"] for p in query.recentProgress
               if "training_samples" in p.observedMetrics]
    assert [sum(row[name] for row in counted)
            for name in ("samples", "orphans", "deads", "duplicate_views")] == [3, 2, 4, 1], \
        "the query progress counts what the sinks got (the clock view is still open)"
    expected = [
        sample("v1", 1, 10, T0, {"surface": "feed", "position": 1}, "like"),
        sample("v2", 1, 10, T0 + 3_000, {"surface": "feed", "position": 2}, "share"),
        sample("v3", 2, 20, T0 + 10_000, {"surface": "search", "lang": "hi"}, "comment"),
    ]
    assert stored_samples(settings) == expected
    published = read_all(kafka, TOPIC_TRAINING_SAMPLES)
    decoded = sorted((decode_sample(m.value) for m in published), key=lambda s: s["sample_id"])
    assert [{k: v for k, v in s.items() if k != "window_ms"} for s in decoded] == expected
    assert {s["window_ms"] for s in decoded} == {WINDOW}
    assert [m.key for m in published if decode_sample(m.value)["user_id"] == 1] == [b"1", b"1"]

    orphans = read_arrow(settings.lake.table(TABLE_ORPHAN_ENGAGEMENTS)).to_pylist()
    assert sorted((o["signal"], o["view_id"], o["reason"]) for o in orphans) == [
        ("play", "v3", "outside_window"), ("skip", "ghost", "no_view")]
    dead = read_arrow(settings.lake.table(TABLE_DEAD_LETTERS)).to_pylist()
    assert sorted((d["topic"], d["reason"]) for d in dead) == [
        ("engagements", "malformed"), ("engagements", "unknown_signal"),
        ("engagements", "view_mismatch"), ("views", "malformed")]

    # later: a re-delivered view and a record behind the watermark are late; nothing rewritten
    send(kafka, TOPIC_VIEWS, [(T0 + 1, view("v1", 1, 10, T0, surface="again"))], key="1")
    send(kafka, TOPIC_ENGAGEMENTS, [(T0 + 1, engagement(1, 10, "skip", T0 + 100, "v1"))])
    run_now(settings, "training_samples")
    assert stored_samples(settings) == expected
    dead = read_arrow(settings.lake.table(TABLE_DEAD_LETTERS)).to_pylist()
    assert sorted(d["reason"] for d in dead).count("late") == 2
    assert len(read_all(kafka, TOPIC_TRAINING_SAMPLES)) == 3


def test_shuffled_traffic_resumed_job_equals_the_batch_recomputation(
        own_broker, make_settings, run_now, spark):
    """Generated traffic (either side first, disorder below the lateness) through a job that
    stops mid-stream and resumes: every view yields exactly one sample, equal to the
    independent batch recomputation, also for views read before the stop and sent again after
    it, by their user or another (the first arrivals are in the checkpoint); a corrupted table
    fails the shadow check with an alert. (The job SIGKILLed at seeded moments, before its
    first commit, inside its sink's writes and between batches: test_samples_chaos.py.)"""
    import datetime

    import pytest
    from deltalake import DeltaTable

    from spark_jobs.catalog import system_topics
    from spark_jobs.contracts.tables import TABLE_ALERTS, TABLE_VALIDATION_RESULTS
    from spark_jobs.samples.shadow.run import ShadowFailed, compare_day, shadow_day
    from spark_jobs.samples.traffic import SamplesTrafficSpec, generate_traffic
    from spark_jobs.streaming.kafka.producer import make_producer, produce_all
    from spark_jobs.streaming.kafka.topic_admin import ensure_topics

    day = datetime.date(2026, 1, 1)
    start = T0 + 3_600_000
    overrides = {"samples": {"window": "20s", "lateness": "5s"},
                 "jobs": {"trigger": "200ms", "max_records_per_trigger": 400}}
    settings = make_settings(own_broker, **overrides)
    kafka = settings.kafka
    ensure_topics(kafka, system_topics("samples"), kafka.partitions)
    spec = SamplesTrafficSpec(users=300, posts=2_000, views_per_s=20, window_ms=20_000,
                              max_disorder_ms=4_000, seed=5)
    records = generate_traffic(spec, views=1_200, start_ms=start)
    tomorrow = T0 + 86_400_000 + 3_600_000  # the clock view is not part of the day compared
    clock = [(TOPIC_VIEWS, "0", json.dumps(view("clock", 0, 0, tomorrow)).encode(), tomorrow)]

    def produce(batch) -> None:
        producer = make_producer(kafka)
        for topic in (TOPIC_VIEWS, TOPIC_ENGAGEMENTS):
            mine = [r for r in batch if r[0] == topic]
            produce_all(producer, topic, [r[1] for r in mine], [r[2] for r in mine],
                        [r[3] for r in mine])
        producer.flush(30)

    produce(records[: len(records) * 2 // 3])
    run_now(settings, "training_samples")  # the first two thirds, then a stop
    assert read_arrow(settings.lake.table(TABLE_TRAINING_SAMPLES)).num_rows > 0, \
        "stopped after some samples were out"
    # ten early views again by their user, ten under another user, all on time
    early = [json.loads(r[2]) for r in records[: len(records) // 3] if r[0] == TOPIC_VIEWS]
    last_ts = max(json.loads(r[2])["ts"] for r in records if r[0] == TOPIC_VIEWS)
    last_kafka = max(r[3] for r in records)
    again = [{**v, "ts": last_ts, "user_id": v["user_id"] + n // 10} for n, v in
             enumerate(early[:20])]
    resent = [(TOPIC_VIEWS, str(v["user_id"]), json.dumps(v).encode(), last_kafka + 1)
              for v in again]
    produce(records[len(records) * 2 // 3:] + resent + clock)
    run_now(settings, "training_samples")  # resumes from the checkpoint

    firsts = {(v["view_id"], v["user_id"], v["ts"]) for v in (
        json.loads(r[2]) for r in records if r[0] == TOPIC_VIEWS)}
    views = {view_id for view_id, _, _ in firsts}
    stored = read_arrow(settings.lake.table(TABLE_TRAINING_SAMPLES)).to_pylist()
    assert sorted(s["sample_id"] for s in stored) == sorted(views), "one sample per view"
    assert {(s["sample_id"], s["user_id"], s["ts"]) for s in stored} == firsts
    assert sum(any(s["labels"].values()) for s in stored) > 100
    report = compare_day(spark, settings, day)
    assert report.agrees and report.batch_samples == len(views), report.as_dict()
    assert shadow_day(spark, settings, day, "test-run")["match_rate"] == 1.0
    published = [decode_sample(m.value) for m in read_all(kafka, TOPIC_TRAINING_SAMPLES)]
    assert {(s["sample_id"], s["user_id"], s["ts"]) for s in published} == firsts, \
        "a replay may publish a sample again, never a second sample of a view"

    victims = sorted(views)[:2]  # 2 of 1,200 missing: 99.83 % < 99.9 %
    DeltaTable(settings.lake.table(TABLE_TRAINING_SAMPLES)).delete(
        "sample_id IN (" + ", ".join(f"'{v}'" for v in victims) + ")")
    with pytest.raises(ShadowFailed) as failed:
        shadow_day(spark, settings, day, "test-run-2")
    assert failed.value.report.missing_in_streaming == 2
    alerts = [a for a in read_arrow(settings.lake.table(TABLE_ALERTS)).to_pylist()
              if a["source"] == "training_samples_shadow"]
    assert len(alerts) == 1 and "99.833%" in alerts[0]["summary"]
    results = read_arrow(settings.lake.table(TABLE_VALIDATION_RESULTS)).to_pylist()
    assert sorted((r["run_id"], r["check"], r["success"]) for r in results) == [
        ("test-run", "sample_match_rate", True), ("test-run", "sample_schema", True),
        ("test-run-2", "sample_match_rate", False), ("test-run-2", "sample_schema", True)]


def test_a_table_written_with_other_signals_fails_at_start(make_settings):
    import pytest

    from spark_jobs.contracts.tables import training_samples
    from spark_jobs.samples.jobs.training_samples import TrainingSamplesSink
    from spark_jobs.settings import ConfigError
    from spark_jobs.streaming.lake.delta import append_rows

    settings = make_settings()
    old = training_samples(("like", "share")).arrow_schema()
    append_rows(settings.lake.table(TABLE_TRAINING_SAMPLES), old.empty_table())
    with pytest.raises(ConfigError, match=r"samples.signals .* differ from the labels"):
        TrainingSamplesSink(settings)


def test_the_shadow_check_of_a_day_without_topics_passes_with_nothing_compared(
        own_broker, make_settings, spark):
    """A platform where training_samples never ran: no topics, no table, a green check."""
    import datetime

    from spark_jobs.samples.shadow.run import shadow_day

    settings = make_settings(own_broker)
    summary = shadow_day(spark, settings, datetime.date(2026, 1, 1), "empty-run")
    assert (summary["batch_samples"], summary["streaming_samples"], summary["match_rate"]) == (
        0, 0, 1.0)


def test_a_view_id_re_sent_after_its_sample_or_under_another_user_yields_one_sample(
        own_broker, make_settings, run_now):
    """CONTRACTS.md section 9: a view_id is de-duplicated across users and after its sample,
    within samples.dedup_ttl of its first arrival; the dropped views are counted, and the
    engagements naming them belong to the first arrival (another user: view_mismatch)."""
    from spark_jobs.catalog import system_topics
    from spark_jobs.streaming.kafka.topic_admin import ensure_topics

    settings = make_settings(own_broker)
    kafka = settings.kafka
    ensure_topics(kafka, system_topics("samples"), kafka.partitions)
    hour = 3_600_000
    # x1 under users 2 and 3: the first Kafka timestamp wins, whatever the partitions
    send(kafka, TOPIC_VIEWS, [(T0 + 1, view("x1", 3, 30, T0 + 2_000, n=3))], key="3")
    send(kafka, TOPIC_VIEWS, [(T0, view("r1", 1, 10, T0)), (T0, view("x1", 2, 20, T0 + 1_000))],
         key="2")
    send(kafka, TOPIC_ENGAGEMENTS, [
        (T0, engagement(1, 10, "share", T0 + 1_000, "r1")),
        (T0, engagement(2, 20, "like", T0 + 1_500, "x1")),
        (T0, engagement(3, 30, "play", T0 + 2_500, "x1")),  # x1 is user 2's view
    ], key="2")
    send(kafka, TOPIC_VIEWS, [(T0, view("clock", 9, 90, T0 + hour))], key="9")

    def duplicates(query) -> list[int]:
        return [p.observedMetrics["training_samples"]["duplicate_views"]
                for p in query.recentProgress if "training_samples" in p.observedMetrics]

    assert sum(duplicates(run_now(settings, "training_samples"))) == 1
    expected = [sample("r1", 1, 10, T0, {}, "share"), sample("x1", 2, 20, T0 + 1_000, {}, "like")]
    assert stored_samples(settings) == expected

    # an hour later, r1 again (its sample is out), by user 1 and by user 4, both on time
    send(kafka, TOPIC_VIEWS, [(T0 + hour, view("r1", 1, 10, T0 + hour + 5_000, again=1))],
         key="1")
    send(kafka, TOPIC_VIEWS, [(T0 + hour, view("r1", 4, 40, T0 + hour + 6_000))], key="4")
    send(kafka, TOPIC_ENGAGEMENTS, [(T0 + hour, engagement(4, 40, "like", T0 + hour + 7_000,
                                                           "r1"))], key="4")
    send(kafka, TOPIC_VIEWS, [(T0 + hour, view("clock2", 9, 90, T0 + 2 * hour))], key="9")
    assert sum(duplicates(run_now(settings, "training_samples"))) == 2
    expected.insert(0, sample("clock", 9, 90, T0 + hour, {}))
    assert stored_samples(settings) == expected
    # the insert of the hour-later samples looked for them by ts too, so that only the files
    # of their ts are read (delta-rs's pruning filter; test_delta.py has the files it skips)
    inserts = [c["operationParameters"] for c in DeltaTable(settings.lake.table(
        TABLE_TRAINING_SAMPLES)).history() if c.get("operation") == "MERGE"]
    assert inserts and re.search(r"\bts (=|>=) ", inserts[0].get("predicate", "")), inserts
    published = sorted((s["sample_id"], s["user_id"], s["ts"]) for s in (
        decode_sample(m.value) for m in read_all(kafka, TOPIC_TRAINING_SAMPLES)))
    assert published == [("clock", 9, T0 + hour), ("r1", 1, T0), ("x1", 2, T0 + 1_000)]
    dead = read_arrow(settings.lake.table(TABLE_DEAD_LETTERS)).to_pylist()
    assert sorted((d["reason"], json.loads(d["raw_value"])["user_id"]) for d in dead) == [
        ("view_mismatch", 3), ("view_mismatch", 4)]
    assert not table_exists(settings.lake.table(TABLE_ORPHAN_ENGAGEMENTS))


def test_a_record_keyed_only_through_a_numeric_string_moves_no_event_time(
        own_broker, make_settings, run_now):
    """user_id and ts are read by the source as the parsers read them (integers only,
    streaming/kafka/json_fields.py): a view whose user_id is the string "1" cannot be used,
    so its ts, ten days ahead, must not make the next day's records late."""
    from spark_jobs.catalog import system_topics
    from spark_jobs.streaming.kafka.topic_admin import ensure_topics

    settings = make_settings(own_broker)
    kafka = settings.kafka
    ensure_topics(kafka, system_topics("samples"), kafka.partitions)
    ahead = T0 + 10 * 86_400_000
    send(kafka, TOPIC_VIEWS, [(ahead, {**view("s1", 1, 10, ahead), "user_id": "1"})], key="1")
    send(kafka, TOPIC_ENGAGEMENTS, [(ahead, {**engagement(1, 10, "like", 0), "ts": str(ahead)})],
         key="1")
    run_now(settings, "training_samples")
    send(kafka, TOPIC_VIEWS, [(T0, view("v1", 1, 10, T0)),
                              (T0, view("clock", 3, 30, T0 + 3_600_000))], key="1")
    send(kafka, TOPIC_ENGAGEMENTS, [(T0, engagement(1, 10, "like", T0 + 1_000, "v1"))], key="1")
    run_now(settings, "training_samples")
    assert stored_samples(settings) == [sample("v1", 1, 10, T0, {}, "like")]
    dead = read_arrow(settings.lake.table(TABLE_DEAD_LETTERS)).to_pylist()
    assert sorted((d["topic"], d["reason"]) for d in dead) == [
        ("engagements", "malformed"), ("views", "malformed")]
