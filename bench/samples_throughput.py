"""training_samples at saturation, and the size of its state per pending view.

A fresh broker is pre-loaded with `--views` views and their engagements from the seeded
generator (spark_jobs.samples.traffic.generate_traffic: Kafka order is event order shuffled
within `--max-disorder`, Kafka timestamp = event time), then one clock view of a bench-only
user, window + lateness after the last event time, so that the watermark passes every
window (as tests/samples/test_training_samples_job.py does). For each `--limits` value
(jobs.max_records_per_trigger; a fresh broker, lake and Spark session each) the job starts
as the runner starts it (start_job, available-now trigger) and runs until it stops, i.e.
until every view's sample is out. Its sink is wrapped to time the plan (`toArrow()`: source
read, shuffles, the two bucketed stateful steps), the Avro publish and the rest (Delta insert of the
samples, orphans, dead letters).

1. Throughput. End to end: input records and samples over the time from query start to
   query end (the Spark session is already up). Steady: the same over the summed
   triggerExecution of the batches after the first `--warmup` ones (the first batch starts
   the Python workers, compiles the plan and opens RocksDB); and over the full batches among
   them (limit reached: ingest while the state is open, before the clock view closes it).
   Samples leave in bursts (a view's sample waits for window + lateness of event time, most
   of them here in the batch after the clock view), so steady samples/s is lumpy; each view
   yields exactly one sample, so views/s is the sustained sample rate. The sample count is
   checked against the distinct generated views (sink, Delta table, topic).
2. State. Every batch is replayed through the pure joiner (the same offset ranges and the
   batch's watermark, each touched user's state pickled and unpickled as BlobState does):
   it gives the pending views and engagements after each batch and their bytes
   (UserJoinState.to_bytes, and pickled with its wake-up), next to the state operators'
   numRowsTotal, memoryUsedBytes and RocksDB SST size of the same batch. Reported at the
   last batch that closed no view (event time advanced less than the window: every view read
   is pending) and at the peak; the replay's samples per batch must equal the job's. The
   bucket state at that batch is also read back with Spark's state data source. The replay's
   own speed is the ceiling of the Python logic; a batch read of both topics with the same
   JSON extraction (no shuffle, no state) is the source's.

    .venv/bin/python -m bench.samples_throughput [--views N] [--limits L1,L2]
        [--max-disorder MS] [--views-per-s R]
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import orjson

from bench.common import (
    Progress,
    RunningJobs,
    Stopwatch,
    bench_settings,
    end_offsets_of,
    executed_batches,
    iso_ms,
    machine_info,
    percentiles,
    progress_list,
    publish_result,
    sandbox,
)
from bench.state_writes import StateWrites
from spark_jobs.contracts.tables import TABLE_TRAINING_SAMPLES
from spark_jobs.contracts.topics import (
    SAMPLES_TOPICS,
    TOPIC_ENGAGEMENTS,
    TOPIC_TRAINING_SAMPLES,
    TOPIC_VIEWS,
)
from spark_jobs.samples.core.joiner import JoinParameters, UserJoinState, add_records, advance
from spark_jobs.samples.core.records import Engagement, Source, View, parse_engagement, parse_view
from spark_jobs.samples.traffic import Record, SamplesTrafficSpec, generate_traffic
from spark_jobs.settings import SamplesSettings, Settings, load_settings

NAME = "samples_throughput"
JOB = "training_samples"
CLOCK_USER = 1  # generated users start at 100001
CLOCK_VIEW_ID = "bench-clock"
REPORT_EVERY_S = 30.0
DURATIONS = ("triggerExecution", "latestOffset", "queryPlanning", "walCommit", "addBatch",
             "commitOffsets")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"bench.{NAME}", description=__doc__.split("\n")[0])
    parser.add_argument("--views", type=int, default=120_000,
                        help="generated views, about 2 messages each (default 120000)")
    parser.add_argument("--views-per-s", type=float, default=100.0,
                        help="event-time density of the traffic (default 100 views/s)")
    parser.add_argument("--max-disorder", type=int, default=60_000,
                        help="max_disorder_ms of the traffic (default 60000, below the 2 min "
                             "lateness)")
    parser.add_argument("--limits", default="25000,100000",
                        help="jobs.max_records_per_trigger, one job run (fresh broker and lake) "
                             "per value, comma-separated (default 25000,100000)")
    parser.add_argument("--engine-limits", action="store_true",
                        help="also measure the source alone and the JVM's de-dup + join on "
                             "the same records (bench.engine_limits.samples_limits)")
    parser.add_argument("--warmup", type=int, default=1,
                        help="first batches left out of the steady rates (default 1)")
    parser.add_argument("--seed", type=int, default=11, help="traffic seed (default 11)")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="give up on the job after this many seconds")
    parser.add_argument("--out", default=None, help="result JSON (default bench/results/...)")
    return parser.parse_args(argv)


# ---------------------------------------------------------------- workload


def workload(spec: SamplesTrafficSpec, views: int, samples: SamplesSettings
             ) -> tuple[list[Record], dict[str, Any]]:
    """The generated traffic plus the clock view, and what it holds."""
    clock = Stopwatch()
    records = generate_traffic(spec, views)
    generate_s = clock.elapsed()
    view_ids, users = set(), set()
    for record in records:
        if record.topic == TOPIC_VIEWS:
            view = orjson.loads(record.value)
            view_ids.add(view["view_id"])
            users.add(view["user_id"])
    last = max(r.timestamp for r in records)
    first = min(r.timestamp for r in records)
    at = last + samples.window_ms + samples.lateness_ms
    text = orjson.dumps({"view_id": CLOCK_VIEW_ID, "user_id": CLOCK_USER, "post_id": 1,
                         "ts": at, "surface": "bench_clock"})
    records.append(Record(TOPIC_VIEWS, str(CLOCK_USER), text, at))
    by_topic = Counter(r.topic for r in records)
    return records, {
        "messages": len(records),
        "by_topic": dict(by_topic),
        "distinct_views": len(view_ids),
        "users": len(users),
        "event_time_span_s": round((last - first) / 1000, 1),
        "clock_view_ts": at,
        "mean_message_bytes": round(sum(len(r.value) for r in records) / len(records), 1),
        "generate_s": round(generate_s, 1),
    }


def preload(settings: Settings, records: list[Record]) -> float:
    """Every record into its topic in Kafka order; returns the seconds it took."""
    from spark_jobs.streaming.kafka.producer import make_producer, produce_all
    from spark_jobs.streaming.kafka.topic_admin import ensure_topics

    ensure_topics(settings.kafka, SAMPLES_TOPICS, settings.kafka.partitions)
    clock = Stopwatch()
    producer = make_producer(settings.kafka)
    try:
        for topic in (TOPIC_VIEWS, TOPIC_ENGAGEMENTS):
            chosen = [r for r in records if r.topic == topic]
            produce_all(producer, topic, [r.key for r in chosen], [r.value for r in chosen],
                        [r.timestamp for r in chosen])
    finally:
        producer.flush(30)
    return clock.elapsed()


def partitions_as_read(settings: Settings) -> dict[str, list[Any]]:
    """The input topics read back: per source offset key (`topic/p`) its messages by offset,
    so that the replay takes exactly the ranges each batch read."""
    from spark_jobs.streaming.kafka.topic_reader import read_all

    found: dict[str, list[Any]] = defaultdict(list)
    for topic in (TOPIC_VIEWS, TOPIC_ENGAGEMENTS):
        for message in read_all(settings.kafka, topic):
            found[f"{topic}/{message.partition}"].append((topic, message))
    for key, messages in found.items():
        messages.sort(key=lambda m: m[1].offset)
        if any(m.offset != i for i, (_, m) in enumerate(messages)):
            raise RuntimeError(f"{key}: offsets are not contiguous from 0")
    return found


# ---------------------------------------------------------------- the job, instrumented


class _TimedFrame:
    """The batch DataFrame as the sink sees it; times `toArrow()` (the plan runs then) and
    counts the output rows per kind."""

    def __init__(self, frame: Any) -> None:
        self._frame = frame
        self.plan_ms = 0.0
        self.kinds: dict[str, int] = {}

    def toArrow(self) -> Any:  # PySpark's name
        started = time.perf_counter()
        table = self._frame.toArrow()
        self.plan_ms += (time.perf_counter() - started) * 1000
        if table.num_rows:
            self.kinds = dict(Counter(table.column("kind").to_pylist()))
        return table

    def __getattr__(self, name: str) -> Any:
        return getattr(self._frame, name)


class TimedSamplesSink:
    """TrainingSamplesSink with, per batch, the plan's time, the Avro publish's time and the
    rest of the sink (Delta inserts and appends, compaction), and the output kinds."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.batches: dict[int, dict[str, Any]] = {}
        self._publish_ms = 0.0
        publish = inner.publish

        def timed_publish(samples: Any) -> int:
            started = time.perf_counter()
            try:
                return publish(samples)
            finally:
                self._publish_ms += (time.perf_counter() - started) * 1000

        inner.publish = timed_publish  # the sink calls self.publish: the instance's wins
        self.state_writes = StateWrites(inner.settings.lake.checkpoint(JOB))

    @property
    def outputs(self) -> Any:  # bench.common closes the producer through this
        return self.inner.outputs

    def __call__(self, batch: Any, batch_id: int) -> None:
        frame = _TimedFrame(batch)
        self._publish_ms = 0.0
        started = time.perf_counter()
        self.inner(frame, batch_id)
        total = (time.perf_counter() - started) * 1000
        self.batches[batch_id] = {
            "plan_ms": round(frame.plan_ms, 1), "publish_ms": round(self._publish_ms, 1),
            "delta_ms": round(total - frame.plan_ms - self._publish_ms, 1),
            "kinds": frame.kinds,
            "state_written": self.state_writes.take(),  # {operator id: bytes}
        }

    def close(self) -> None:
        self.inner.close()


@dataclass
class JobRun:
    wall_s: float
    session_start_s: float
    progresses: list[Progress]
    timings: dict[int, dict[str, Any]]
    stored: dict[str, Any]
    source: dict[str, Any]


def run_job(settings: Settings, timeout_s: float, state_batch_of: Any) -> JobRun:
    """Start the session (not timed), then the job (timed) until it stops by itself; then
    read back the bucket state at the batch `state_batch_of(progresses)` names."""
    from spark_jobs.streaming.runner import start_job
    from spark_jobs.streaming.spark_session import build_session

    clock = Stopwatch()
    spark = build_session(settings, app_name=f"tideline-bench-{NAME}")
    session_start_s = clock.elapsed()
    try:
        clock = Stopwatch()
        query, sink = start_job(spark, settings, JOB, available_now=True,
                                wrap_sink=TimedSamplesSink)
        jobs = RunningJobs({JOB: query}, {JOB: sink})
        try:
            while not query.awaitTermination(REPORT_EVERY_S):
                jobs.check()
                if clock.elapsed() > timeout_s:
                    raise TimeoutError(f"{JOB} still running after {timeout_s:.0f} s")
                last = query.lastProgress or {}
                print(f"  {clock.elapsed():.0f} s: batch {last.get('batchId')}, "
                      f"{last.get('numInputRows')} rows, "
                      f"{last.get('durationMs', {}).get('triggerExecution')} ms",
                      file=sys.stderr, flush=True)
            wall_s = clock.elapsed()
            jobs.check()
            progresses = progress_list(query)
        finally:
            jobs.stop(finish_s=5.0)
        batch = state_batch_of(executed_batches(progresses))
        stored = stored_state(spark, settings, batch) if batch is not None else {}
        source = source_probe(spark, settings)
    finally:
        spark.stop()
    return JobRun(wall_s, session_start_s, progresses, sink.batches, stored, source)


def source_probe(spark: Any, settings: Settings) -> dict[str, Any]:
    """The job's first steps alone, in the warm session: both topics read by the same source
    (batch mode) with the key, event time and view_id read by the source as build() reads
    them, without the shuffles and the stateful steps. What is left of the plan's time is
    theirs."""
    from spark_jobs.streaming.kafka.source import read_topic_batch

    clock = Stopwatch()
    raw = read_topic_batch(spark, settings.kafka, (TOPIC_VIEWS, TOPIC_ENGAGEMENTS),
                           json_longs=["user_id", "ts"], json_strings=["view_id"])
    rows = raw.select("user_id", "ts", "view_id").toArrow().num_rows
    seconds = clock.elapsed()
    return {"records": rows, "seconds": round(seconds, 2),
            "records_per_s": round(rows / seconds) if seconds else None}


# the query's stateful steps: (name, state data source options, what one row measures)
STATE_STEPS = (("join", {}, "length(value.groupState.blob)"),  # a bucket's blob
               ("dedup", {"stateVarName": "firsts"}, "1"))  # a view_id's first arrival


def stored_state(spark: Any, settings: Settings, batch_id: int) -> dict[str, Any]:
    """The job's state after `batch_id`, read with Spark's state data source: the per-user
    join, one row per bucket holding its users' blob (streaming/bucketed/store.py); the
    view_id de-duplication, one row per remembered view_id (its MapState). Operator ids
    follow Spark's planning, so each step is looked for under both."""
    found: dict[str, Any] = {"batch": batch_id}
    errors = []
    for step, options, measure in STATE_STEPS:
        for operator in (0, 1):
            try:
                frame = (spark.read.format("statestore")
                         .option("path", settings.lake.checkpoint(JOB))
                         .option("batchId", batch_id).option("operatorId", operator)
                         .options(**options).load())
                sizes = frame.selectExpr(f"{measure} AS bytes").toArrow()[
                    "bytes"].to_pylist()
            except Exception as exc:  # not this operator, or a reader limitation
                errors.append(f"{step}/{operator}: {str(exc).splitlines()[0][:200]}")
                continue
            found[step] = ({"operator": operator, "buckets": len(sizes),
                            "value_bytes": sum(sizes),
                            "value_bytes_per_bucket": percentiles(sizes, (50, 99))}
                           if step == "join" else
                           {"operator": operator, "view_ids": len(sizes)})
            break
    if "join" not in found or "dedup" not in found:
        found["error"] = "; ".join(errors)
    return found


# ---------------------------------------------------------------- the pure replay


@dataclass
class Snapshot:
    """The replayed state after one batch."""

    batch: int
    watermark: int
    read: int  # input records read so far
    samples: int  # emitted in this batch
    users: int  # users with pending records
    views: int
    engagements: int
    blob_bytes: int  # sum of UserJoinState.to_bytes
    stored_bytes: int  # as BlobState stores it: pickle.dumps((blob, timer))
    view_bytes: int = 0  # the same states with their views alone, less an empty state's bytes
    engagement_bytes: int = 0  # ... with their engagements alone
    blob_bytes_per_user: dict[str, float] | None = None
    keys: int = 0  # users handled in the batch (input rows or a due timer)
    bytes_moved: int = 0  # state values read and written in the batch (BlobState bytes)


@dataclass
class _Held:
    blob: bytes
    wakeup: int
    views: int
    engagements: int
    stored: int


def batch_watermark(progress: Progress) -> int:
    text = progress.get("eventTime", {}).get("watermark")
    return iso_ms(text) if text else 0


def replay(partitions: dict[str, list[Any]], batches: list[Progress], params: JoinParameters
           ) -> tuple[list[Snapshot], float, int]:
    """The job's batches through the pure joiner; returns the snapshots, the seconds the
    joining took (parse, add, advance, state pickling) and the records replayed."""
    held: dict[int, _Held] = {}
    consumed = dict.fromkeys(partitions, 0)
    snapshots: list[Snapshot] = []
    busy = 0.0
    read = 0
    for progress in batches:
        watermark = batch_watermark(progress)
        ends = end_offsets_of(progress)
        messages = []
        for key, end in ends.items():
            messages += partitions.get(key, [])[consumed.get(key, 0):end]
            consumed[key] = max(consumed.get(key, 0), end)
        read += len(messages)
        started = time.perf_counter()
        by_user: dict[int, list[Any]] = defaultdict(list)
        for topic, message in messages:
            key = message.key.decode() if message.key is not None else None
            source = Source(topic, message.partition, message.offset, message.timestamp, key)
            record = (parse_view(message.value, source) if topic == TOPIC_VIEWS
                      else parse_engagement(message.value, source, params.signals))
            if isinstance(record, View | Engagement):
                by_user[record.user_id].append(record)
        samples = moved = 0
        due = [u for u, h in held.items() if h.wakeup <= watermark and u not in by_user]
        for user in [*by_user, *due]:
            found = held.pop(user, None)
            moved += found.stored if found else 0
            state = UserJoinState.from_bytes(found.blob) if found else UserJoinState()
            result = add_records(state, by_user.get(user, ()), watermark, params)
            result.extend(advance(state, watermark, params))
            samples += len(result.samples)
            if not state.is_empty():
                blob, wakeup = state.to_bytes(), state.next_wakeup()
                stored = len(pickle.dumps((blob, wakeup), protocol=5))
                held[user] = _Held(blob, wakeup, *state.pending_size(), stored)
                moved += stored
        busy += time.perf_counter() - started
        snap = snapshot(progress["batchId"], watermark, read, samples, held, params.window_ms)
        snap.keys, snap.bytes_moved = len(by_user) + len(due), moved
        snapshots.append(snap)
    return snapshots, busy, read


def snapshot(batch: int, watermark: int, read: int, samples: int, held: dict[int, _Held],
             window_ms: int) -> Snapshot:
    """Pending records and their bytes; view_bytes and engagement_bytes split them: each
    state re-pickled with only its views (only its engagements), less an empty state."""
    empty = len(UserJoinState(window_ms).to_bytes())
    view_bytes = engagement_bytes = 0
    for h in held.values():
        state = UserJoinState.from_bytes(h.blob)
        if state.views:
            view_bytes += len(UserJoinState(window_ms, views=state.views).to_bytes()) - empty
        if state.engagements:
            engagement_bytes += len(UserJoinState(
                window_ms, engagements=state.engagements).to_bytes()) - empty
    sizes = [len(h.blob) for h in held.values()]
    return Snapshot(
        batch, watermark, read, samples, len(held), sum(h.views for h in held.values()),
        sum(h.engagements for h in held.values()), sum(sizes),
        sum(h.stored for h in held.values()), view_bytes, engagement_bytes,
        {**percentiles(sizes, (50, 99)), "max": max(sizes, default=0)},
    )


# ---------------------------------------------------------------- reports


def state_point(batches: list[Progress], first_view_ms: int, window_ms: int) -> int | None:
    """The last batch with input whose watermark closed no view yet: every view it has read
    is pending, event time having advanced less than the window."""
    open_ = [p["batchId"] for p in batches
             if p.get("numInputRows") and batch_watermark(p) < first_view_ms + window_ms]
    return open_[-1] if open_ else None


def operator_state(progress: Progress) -> dict[str, Any]:
    """The state operators' numbers, summed over the query's stateful steps."""
    ops = progress.get("stateOperators") or [{}]

    def total(values: list[Any]) -> int | None:
        known = [v for v in values if v is not None]
        return sum(known) if known else None

    sst = total([op.get("customMetrics", {}).get("rocksdbSstFileSize") for op in ops])
    return {"numRowsTotal": total([op.get("numRowsTotal") for op in ops]),
            "memoryUsedBytes": total([op.get("memoryUsedBytes") for op in ops]),
            "commitTimeMs": total([op.get("commitTimeMs") for op in ops]),
            "customMetrics": {"rocksdbSstFileSize": sst}}


def state_report(progress: Progress, snap: Snapshot, first_view_ms: int) -> dict[str, Any]:
    """The operator's numbers and the replay's at one batch, per pending view."""
    op = operator_state(progress)
    sst = op["customMetrics"].get("rocksdbSstFileSize")
    views, engagements = snap.views, snap.engagements

    def per(total: int | None, count: int) -> float | None:
        return round(total / count, 1) if total is not None and count else None

    return {
        "batch": snap.batch,
        "watermark_after_first_view_s": (round((snap.watermark - first_view_ms) / 1000)
                                         if snap.watermark else None),
        "pending_views": views,
        "pending_engagements": engagements,
        "users_with_state": snap.users,
        "operator": op,
        "rocksdb_sst_bytes_per_pending_view": per(sst, views),
        "memory_used_bytes_per_pending_view": per(op["memoryUsedBytes"], views),
        "state_rows_per_user": per(op["numRowsTotal"], snap.users),
        "blob_bytes_per_pending_view": per(snap.blob_bytes, views),
        "stored_bytes_per_pending_view": per(snap.stored_bytes, views),
        "blob_bytes_per_view_alone": per(snap.view_bytes, views),
        "blob_bytes_per_engagement_alone": per(snap.engagement_bytes, engagements),
        "blob_bytes_per_user": snap.blob_bytes_per_user,
        "replay": asdict(snap),
    }


def batch_rows(batches: list[Progress], timings: dict[int, dict[str, Any]],
               snapshots: dict[int, Snapshot]) -> list[dict[str, Any]]:
    rows = []
    for p in batches:
        t = timings.get(p["batchId"], {})
        snap = snapshots.get(p["batchId"])
        op = operator_state(p)
        rows.append({
            "batch": p["batchId"],
            "rows": p.get("numInputRows", 0),
            "watermark": batch_watermark(p),
            "samples": t.get("kinds", {}).get("sample", 0),
            "replay_samples": snap.samples if snap else None,
            "pending_views": snap.views if snap else None,
            "pending_engagements": snap.engagements if snap else None,
            "keys": snap.keys if snap else None,
            "state_mb_moved": round(snap.bytes_moved / 1e6, 1) if snap else None,
            "state_rows": op["numRowsTotal"],
            "sst_bytes": op["customMetrics"].get("rocksdbSstFileSize"),
            "memory_bytes": op["memoryUsedBytes"],
            **{k: p["durationMs"].get(k, 0) for k in DURATIONS},
            "plan_ms": t.get("plan_ms"), "publish_ms": t.get("publish_ms"),
            "delta_ms": t.get("delta_ms"),
            "state_commit_ms": op["commitTimeMs"],
            "state_written_bytes": t.get("state_written"),
        })
    return rows


def time_shares(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Where the summed triggerExecution went: source planning, the plan (read + shuffle +
    transformWithState), the publish, the Delta writes, the rest (WAL, commits, planning)."""
    total = sum(r["triggerExecution"] for r in rows)
    if not total:
        return {}
    parts = {
        "latestOffset": sum(r["latestOffset"] for r in rows),
        "plan": sum(r["plan_ms"] or 0 for r in rows),
        "publish": sum(r["publish_ms"] or 0 for r in rows),
        "delta": sum(r["delta_ms"] or 0 for r in rows),
    }
    parts["other"] = max(0.0, total - sum(parts.values()))
    return {k: round(v / total, 3) for k, v in parts.items()}


def throughput(rows: list[dict[str, Any]], wall_s: float, warmup: int, limit: int
               ) -> dict[str, Any]:
    read = sum(r["rows"] for r in rows)
    samples = sum(r["samples"] for r in rows)
    steady = rows[warmup:]
    busy_s = sum(r["triggerExecution"] for r in steady) / 1000
    steady_rows = sum(r["rows"] for r in steady)
    steady_samples = sum(r["samples"] for r in steady)
    data = [r for r in rows if r["rows"]]
    full = [r for r in steady if r["rows"] >= 0.9 * limit]
    full_s = sum(r["triggerExecution"] for r in full) / 1000
    keys = sum(r["keys"] or 0 for r in full)
    return {
        "wall_s": round(wall_s, 1),
        "records": read,
        "samples": samples,
        "records_per_s_end_to_end": round(read / wall_s, 1),
        "samples_per_s_end_to_end": round(samples / wall_s, 1),
        "steady_batches": len(steady),
        "steady_busy_s": round(busy_s, 1),
        "records_per_s_steady": round(steady_rows / busy_s, 1) if busy_s else None,
        "samples_per_s_steady": round(steady_samples / busy_s, 1) if busy_s else None,
        "first_batch_s": round(rows[0]["triggerExecution"] / 1000, 1) if rows else None,
        "batches": len(rows),
        "data_batches": len(data),
        "batch_ms": percentiles([r["triggerExecution"] for r in data], (50, 95)),
        "time_shares_steady": time_shares(steady),
        "time_shares_all": time_shares(rows),
        "full_batches": len(full),
        "records_per_s_full_batches": round(sum(r["rows"] for r in full) / full_s, 1)
        if full_s else None,
        "plan_ms_per_key": round(sum(r["plan_ms"] or 0 for r in full) / keys, 3)
        if keys else None,
        "plan_ms_per_record": round(sum(r["plan_ms"] or 0 for r in full)
                                    / max(1, sum(r["rows"] for r in full)), 3),
        "state_mb_moved_per_batch": round(sum(r["state_mb_moved"] or 0 for r in full)
                                          / len(full), 1) if full else None,
        "state_written_per_full_batch": state_written(full),
    }


def state_written(full: list[dict[str, Any]]) -> dict[str, Any]:
    """New state files per operator (the checkpoint's growth) over the full batches: MB per
    batch, and bytes per input record (flat when the writes follow the batch, growing when
    they follow what the state holds)."""
    per_op: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for r in full:
        for op, written in (r["state_written_bytes"] or {}).items():
            per_op[op].append((written, r["rows"]))
    return {op: {"mb_per_batch": round(sum(w for w, _ in pairs) / len(pairs) / 1e6, 2),
                 "bytes_per_record": [round(w / n, 1) for w, n in pairs if n]}
            for op, pairs in sorted(per_op.items())}


def sample_check(settings: Settings, expected: int, sink_samples: int, replay_samples: int
                 ) -> dict[str, Any]:
    """Samples in the sink, the Delta table (distinct ids) and the topic vs distinct views."""
    from spark_jobs.streaming.kafka.topic_admin import end_offsets
    from spark_jobs.streaming.lake.delta import read_arrow

    ids = read_arrow(settings.lake.table(TABLE_TRAINING_SAMPLES), columns=["sample_id"])
    table_rows = ids.num_rows
    distinct = len(set(ids["sample_id"].to_pylist()))
    topic = sum(end_offsets(settings.kafka, TOPIC_TRAINING_SAMPLES).values())
    counts = {"distinct_views": expected, "sink": sink_samples, "replay": replay_samples,
              "delta_rows": table_rows, "delta_distinct_ids": distinct, "topic_messages": topic}
    return {**counts, "ok": len(set(counts.values())) == 1}


# ---------------------------------------------------------------- output


def _cell(run: dict[str, Any], what: str) -> str:
    """One cell of the summary table: `what` of one run."""
    t, st, check = run["throughput"], run["state"], run["sample_check"]
    point, peak, stored = st["pending_point"] or {}, st["peak"] or {}, st["stored_value_state"]
    probe, ceiling = run["source_probe"], run["python_ceiling"]
    if what == "end":
        return (f"**{t['records_per_s_end_to_end']:,.0f} records/s, "
                f"{t['samples_per_s_end_to_end']:,.0f} samples/s** ({t['records']:,} records "
                f"in {t['wall_s']} s)")
    if what == "steady":
        return (f"**{t['records_per_s_steady']:,.0f} records/s, {t['samples_per_s_steady']:,.0f}"
                f" samples/s** ({t['steady_batches']} batches, {t['steady_busy_s']} s; first "
                f"batch {t['first_batch_s']} s)")
    if what == "full":
        if t["records_per_s_full_batches"] is None:
            return "- (no full batch after the first)"
        return (f"{t['records_per_s_full_batches']:,.0f} records/s "
                f"({t['full_batches']} batches of ~{run['limit']:,})")
    if what == "batches":
        return (f"{t['data_batches']} with input + {t['batches'] - t['data_batches']} without; "
                f"p50 {t['batch_ms']['p50'] / 1000:.1f} s, p95 {t['batch_ms']['p95'] / 1000:.1f} s")
    if what == "shares":
        return ", ".join(f"{k} {v:.0%}" for k, v in t["time_shares_steady"].items())
    if what == "per_key":
        if t["plan_ms_per_key"] is None:
            return "-"
        return (f"plan {t['plan_ms_per_key']} ms per user handled, {t['plan_ms_per_record']} ms "
                f"per record; {t['state_mb_moved_per_batch']} MB of state values read + "
                f"written per full batch")
    if what == "check":
        return (f"{check['sink']:,} = {check['distinct_views']:,} distinct views = "
                f"{check['delta_distinct_ids']:,} Delta ids = {check['topic_messages']:,} topic "
                f"messages: {'ok' if check['ok'] else 'MISMATCH'}; replay per batch "
                f"{'equal' if st['replay_matches_job'] else 'DIFFERS'}")
    if what in ("point", "peak"):
        rep = point if what == "point" else peak
        if not rep:
            return "-"
        op = rep["operator"]
        return (f"batch {rep['batch']}, watermark {rep['watermark_after_first_view_s']} s past "
                f"the first view: {rep['pending_views']:,} views + "
                f"{rep['pending_engagements']:,} engagements pending over "
                f"{rep['users_with_state']:,} users; {op['numRowsTotal']:,} state rows; "
                f"SST {rep['rocksdb_sst_bytes_per_pending_view']} B, memoryUsed "
                f"{rep['memory_used_bytes_per_pending_view']} B per pending view")
    if what == "blob":
        rep = point or peak
        return (f"{rep['blob_bytes_per_pending_view']} B per pending view (with its share of "
                f"engagements); views alone {rep['blob_bytes_per_view_alone']} B/view, "
                f"engagements alone {rep['blob_bytes_per_engagement_alone']} B/engagement; "
                f"per user p50 {rep['blob_bytes_per_user']['p50']:,.0f} B, p99 "
                f"{rep['blob_bytes_per_user']['p99']:,.0f} B")
    if what == "stored":
        if "join" not in stored or "dedup" not in stored:
            return stored.get("error", "-")
        join, dedup = stored["join"], stored["dedup"]
        return (f"batch {stored['batch']}: join {join['value_bytes']:,} B in "
                f"{join['buckets']} buckets = {stored.get('bytes_per_pending_view')} B per "
                f"pending view; de-dup {dedup['view_ids']:,} view_ids remembered = "
                f"{stored.get('dedup_view_ids_per_view_read')} per view read")
    if what == "source":
        return f"{probe['records_per_s']:,} records/s"
    if what == "python":
        return f"{ceiling['records_per_s']:,} records/s"
    raise ValueError(what)


ROWS = (
    ("end", "end to end, query start to end (session start not counted)"),
    ("steady", "steady: every batch after the first (its warm-up left out)"),
    ("full", "full batches after the first (state open, before the clock)"),
    ("batches", "batches (triggerExecution)"),
    ("shares", "steady batch time: source planning / plan (read + shuffle + TWS) / Avro "
               "publish / Delta / rest"),
    ("per_key", "plan cost"),
    ("check", "samples check"),
    ("point", "state when no view has closed yet"),
    ("peak", "state at the most pending views"),
    ("blob", "pickled UserJoinState.to_bytes (domain), at the first of those"),
    ("stored", "bucket state read back (state data source), same batch"),
    ("source", "source alone: both topics, batch read + user_id, ts, view_id (warm session)"),
    ("python", "pure joiner replay of the same batches (1 core, with state pickling)"),
)


def summary_lines(result: dict[str, Any]) -> list[str]:
    w, m, runs = result["workload"], result["machine"], result["runs"]
    lines = [
        f"{NAME}: {w['messages']:,} messages ({w['by_topic'].get(TOPIC_VIEWS, 0):,} views incl."
        f" duplicates and the clock view, {w['by_topic'].get(TOPIC_ENGAGEMENTS, 0):,} "
        f"engagements; {w['distinct_views']:,} distinct views, {w['users']:,} users, "
        f"{w['event_time_span_s'] / 60:.1f} min of event time at "
        f"{result['params']['views_per_s']:g} views/s, max_disorder "
        f"{result['params']['max_disorder_ms'] / 1000:g} s); {m['cores']} cores ({m['cpu']}), "
        f"load average {m['load_average_at_start']} at start, {m.get('load_average_at_end')} "
        "at end",
        "",
        "| measure | " + " | ".join(f"max_records_per_trigger {r['limit']:,}" for r in runs)
        + " |",
        "|---|" + "---|" * len(runs),
    ]
    for what, label in ROWS:
        lines.append(f"| {label} | " + " | ".join(_cell(r, what) for r in runs) + " |")
    for run in runs:
        lines += ["", f"limit {run['limit']:,}, per batch: id rows watermark(s past first view) "
                  "samples pending(views/engagements) users_handled state_MB_moved state_rows "
                  "sst_MB | trigger latestOffset plan publish delta state_commit (ms)"]
        for r in run["batches"]:
            lines.append(
                f"  {r['batch']:3d} {r['rows']:7,d} {r['watermark_s']:>6} {r['samples']:7,d} "
                f"{r['pending_views']}/{r['pending_engagements']} {r['keys']} "
                f"{r['state_mb_moved']} {r['state_rows']} {(r['sst_bytes'] or 0) / 1e6:.1f} | "
                f"{r['triggerExecution']} {r['latestOffset']} {r['plan_ms']} {r['publish_ms']} "
                f"{r['delta_ms']} {r['state_commit_ms']}")
    engine = result.get("engine_limits")
    if engine:
        lines += ["", f"engine limits, same records: source alone "
                  f"{engine['source_alone']['rows_per_s']:,} records/s; JVM de-dup + join "
                  f"{engine['join']['rows_per_s']:,} rows/s ({engine['join']['rows']:,} rows out "
                  f"of {sum(engine['preparsed'].values()):,} pre-parsed records, "
                  f"{engine['join']['seconds']} s)"]
    return lines


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def run_limit(args: argparse.Namespace, limit: int, records: list[Record],
              mix: dict[str, Any]) -> dict[str, Any]:
    """One job run over the whole workload in a fresh broker and lake, and its analysis."""
    first_view = min(r.timestamp for r in records if r.topic == TOPIC_VIEWS)
    with sandbox(f"{NAME}-{limit}") as box:
        settings = bench_settings(box, {"jobs": {"max_records_per_trigger": limit}})
        samples = settings.samples
        produce_s = preload(settings, records)
        partitions = partitions_as_read(settings)
        print(f"limit {limit:,}: pre-loaded {mix['messages']:,} messages in {produce_s:.1f} s;"
              " starting the job", flush=True)

        def point_of(batches: list[Progress]) -> int | None:
            return state_point(batches, first_view, samples.window_ms)

        run = run_job(settings, args.timeout, point_of)
        batches = executed_batches(run.progresses)
        params = JoinParameters(samples.window_ms, samples.signals)
        snapshots, busy, replayed = replay(partitions, batches, params)
        by_batch = {s.batch: s for s in snapshots}
        rows = batch_rows(batches, run.timings, by_batch)
        for row in rows:
            row["watermark_s"] = (round((row["watermark"] - first_view) / 1000)
                                  if row["watermark"] else "-")
        progress_of = {p["batchId"]: p for p in batches}
        point = point_of(batches)
        peak = max(snapshots, key=lambda s: s.views)
        reports: dict[str, Any] = {}
        for label, batch in (("pending_point", point), ("peak", peak.batch)):
            reports[label] = (None if batch is None else
                              state_report(progress_of[batch], by_batch[batch], first_view))
        if "error" not in run.stored and point is not None and by_batch[point].views:
            run.stored["bytes_per_pending_view"] = round(
                run.stored["join"]["value_bytes"] / by_batch[point].views, 1)
            views_read = sum(end for key, end in end_offsets_of(progress_of[point]).items()
                             if key.startswith(f"{TOPIC_VIEWS}/"))
            run.stored["dedup_view_ids_per_view_read"] = round(
                run.stored["dedup"]["view_ids"] / max(1, views_read), 3)
        check = sample_check(settings, mix["distinct_views"],
                             sum(r["samples"] for r in rows), sum(s.samples for s in snapshots))
    return {
        "limit": limit,
        "produce_s": round(produce_s, 1),
        "session_start_s": round(run.session_start_s, 1),
        "throughput": throughput(rows, run.wall_s, args.warmup, limit),
        "sample_check": check,
        "state": {**reports,
                  "replay_matches_job": all(r["samples"] == r["replay_samples"] for r in rows),
                  "stored_value_state": run.stored},
        "source_probe": run.source,
        "python_ceiling": {"records": replayed, "seconds": round(busy, 2),
                           "records_per_s": round(replayed / busy) if busy else None},
        "batches": rows,
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    machine = {**machine_info(), "cpu": cpu_model()}
    samples = load_settings(environ={}).samples
    spec = SamplesTrafficSpec(views_per_s=args.views_per_s, window_ms=samples.window_ms,
                              max_disorder_ms=args.max_disorder, seed=args.seed)
    records, mix = workload(spec, args.views, samples)
    print(f"generated {mix['messages']:,} messages ({mix['distinct_views']:,} views) in "
          f"{mix['generate_s']} s", flush=True)
    limits = [int(x) for x in args.limits.split(",") if x.strip()]
    runs = [run_limit(args, limit, records, mix) for limit in limits]
    engine = None
    if args.engine_limits:
        from bench.engine_limits import samples_limits

        with sandbox(f"{NAME}-limits") as box:
            settings = bench_settings(box, {"jobs": {"max_records_per_trigger": limits[-1]}})
            preload(settings, records)
            print("measuring the engine's limits on the same records", flush=True)
            engine = samples_limits(settings)
    result = {
        "benchmark": NAME,
        "machine": machine,
        "params": {"views": args.views, "views_per_s": args.views_per_s,
                   "max_disorder_ms": args.max_disorder, "limits": limits,
                   "warmup": args.warmup, "seed": args.seed, "window_ms": samples.window_ms,
                   "lateness_ms": samples.lateness_ms, "trigger": "availableNow",
                   "shuffle_partitions": 2, "spark_master": "local[2]"},
        "workload": mix,
        "runs": runs,
        "engine_limits": engine,
    }
    publish_result(NAME, args.out, result, summary_lines)
    failed = [run["limit"] for run in runs if not run["sample_check"]["ok"]]
    if failed:
        print(f"WARNING: sample count check failed for limit(s) {failed}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
