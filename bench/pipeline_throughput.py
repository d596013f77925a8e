"""Sustained end-to-end throughput of the three jobs running together in one SparkSession.

The input topics are pre-loaded with generated traffic (compressed durations, as the tests
use), then filter_events, filter_activations and experiment_metrics start as concurrent
queries with processing-time triggers, as the demo runs them. The clock runs from the start
of the queries (the session is already up) until both filters have read every input message
and experiment_metrics has read everything the filters wrote, so it includes the first
batches' warm-up. Per job it reports rows/s, batch durations, where batch time goes and the
size of the state; then it replays the same clean rows through the pure per-user Python
logic alone, to show how much of the metrics job's cost is Spark rather than Python.
The input ends with one event and one activation of a bench-only user at the last event
time, so that experiment_metrics never waits for an idle input topic (`release_records`).

    .venv/bin/python -m bench.pipeline_throughput [--messages N] [--users U] [--limit L]
"""

from __future__ import annotations

import argparse
import heapq
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import groupby
from typing import Any

import orjson

from bench.bucket_state import bucket_state
from bench.common import (
    FILTERS,
    JOBS,
    METRICS,
    Progress,
    RunningJobs,
    Stopwatch,
    batch_end_s,
    bench_settings,
    executed_batches,
    machine_info,
    percentiles,
    progress_list,
    publish_result,
    sandbox,
    start_jobs,
    wait_until_drained,
)
from bench.memory import peak_memory
from spark_jobs.contracts.tables import TABLE_DEAD_LETTERS, TABLE_RAW_ACTIVATIONS, TABLE_RAW_EVENTS
from spark_jobs.contracts.topics import EXPERIMENT_TOPICS, TOPIC_ACTIVATIONS, TOPIC_EVENTS
from spark_jobs.experiments.core.user_metrics import MetricParams, UserMetricsState
from spark_jobs.experiments.traffic import HOUR_MS, TrafficSpec, generate
from spark_jobs.settings import Settings

NAME = "pipeline_throughput"
DURATION_MS = 3 * HOUR_MS  # 4.5 periods of 40 min, 36 windows of 5 min
SEED = 11
RELEASE_EXPERIMENT = "bench_release"
BUCKETED_JOBS = ("filter_events", "experiment_metrics")  # one bucketed operator each
EXPERIMENTS = {
    "period": "40m", "window": "5m", "lateness": "1m", "dedup_ttl": "1m",
    "cap_per_user_hour": 300,
}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench.pipeline_throughput", description="End-to-end throughput of the 3 jobs."
    )
    parser.add_argument("--messages", type=int, default=600_000,
                        help="approximate input messages; sets the user count (default 600000)")
    parser.add_argument("--users", type=int, default=None,
                        help="users of the 3 h workload (overrides --messages)")
    parser.add_argument("--limit", type=int, default=100_000,
                        help="jobs.max_records_per_trigger (default 100000)")
    parser.add_argument("--trigger", default="0",
                        help="processing-time trigger of every job (default 0: back to back)")
    parser.add_argument("--timeout", type=float, default=3600.0,
                        help="give up after this many seconds of pipeline time")
    parser.add_argument("--limits", action="store_true",
                        help="also measure the engine's limits on the same topics "
                             "(bench.engine_limits: source alone, JVM aggregation and join)")
    parser.add_argument("--master", default=None,
                        help="spark.master of the run (default local[2]; e.g. a standalone "
                             "cluster's spark://127.0.0.1:7077, as bench.cluster_scaling does)")
    parser.add_argument("--no-ceiling", action="store_true",
                        help="skip the pure-Python replay of the clean rows")
    parser.add_argument("--pre-exposure", default=None,
                        help="experiments.pre_exposure, CUPED's lookback (default: the "
                             "setting's, 1d: the whole 3 h workload; 0 turns it off)")
    parser.add_argument("--out", default=None, help="result JSON (default bench/results/...)")
    return parser.parse_args(argv)


# ---------------------------------------------------------------- workload


def count_messages(spec: TrafficSpec) -> int:
    return sum(1 for _ in generate(spec))


def workload_spec(settings: Settings, messages: int, users: int | None) -> TrafficSpec:
    """A 3 h spec whose user count gives about `messages` messages (a linear fit on two small
    specs: spammers add a fixed number, each user a constant number on average)."""
    base = TrafficSpec.from_settings(settings.experiments, seed=SEED, duration_ms=DURATION_MS)
    if users is None:
        small, large = (count_messages(replace(base, n_users=n)) for n in (100, 300))
        per_user = (large - small) / 200
        fixed = small - 100 * per_user
        users = max(1, round((messages - fixed) / per_user))
    return replace(base, n_users=users)


def preload(spec: TrafficSpec, settings: Settings) -> dict[str, Any]:
    """Fill the input topics, load the ramps and publish the snapshot; returns the mix."""
    from spark_jobs.experiments.admin.metadata import add_ramps
    from spark_jobs.experiments.admin.snapshot import publish_snapshot
    from spark_jobs.experiments.core.periods import RampRow
    from spark_jobs.experiments.traffic import produce
    from spark_jobs.streaming.kafka.topic_admin import ensure_topics

    ensure_topics(settings.kafka, EXPERIMENT_TOPICS, settings.kafka.partitions)
    report = produce(spec, settings, progress=False)
    release = release_records(spec, settings)
    rows = [RampRow(**row) for row in spec.ramp_rows()] + [release_ramp(spec)]
    add_ramps(settings.metadata.url, rows)
    publish_snapshot(settings, spec.start_ms + spec.duration_ms, None)
    return {
        "messages": report.total() + 2,
        "by_topic": report.counts,
        "release_records": release,
        "users": spec.n_users,
        "spammers": spec.n_spammers,
        "event_time_hours": spec.duration_ms / HOUR_MS,
        "produce_msg_per_s": round(report.rate),
    }


def release_ramp(spec: TrafficSpec) -> Any:
    """A bench-only experiment whose period holds the release records' event time."""
    from spark_jobs.experiments.core.periods import RampRow

    ramp_ts = spec.start_ms + spec.duration_ms - spec.period_ms // 2
    return RampRow(RELEASE_EXPERIMENT, "control", ramp_ts, 100.0, True)


def release_records(spec: TrafficSpec, settings: Settings) -> dict[str, Any]:
    """An event and an activation at the workload's last millisecond, produced last.

    experiment_metrics reads both filtered topics aligned on event time, and a topic with
    nothing new holds the other back at its last record's time until more arrives or
    jobs.idle_timeout (30 s) passes. Live traffic keeps both topics moving; with a finite
    pre-loaded input the tail past the other topic's last record would wait for that
    timeout (forever before the timeout existed), and the benchmark would time the wait.
    One record of a bench-only user and experiment at the same final event time in each
    topic lets everything through at once.
    """
    from spark_jobs.streaming.kafka.producer import make_producer, produce_all

    user = spec.user_id(spec.n_users + spec.n_spammers)  # after every generated user
    ts = spec.start_ms + spec.duration_ms - 1
    event = {"user_id": user, "event_type": spec.critical_event_types[0], "ts": ts}
    activation = {"user_id": user, "experiment_hash": RELEASE_EXPERIMENT,
                  "experiment_group": "control", "ts": ts}
    producer = make_producer(settings.kafka)
    try:
        for topic, record in ((TOPIC_EVENTS, event), (TOPIC_ACTIVATIONS, activation)):
            produce_all(producer, topic, [str(user)], [orjson.dumps(record)])
    finally:
        producer.close()
    return {"event": event, "activation": activation}


# ---------------------------------------------------------------- the timed run


@dataclass
class PipelineRun:
    """What the timed part produced: clock readings and every job's batch progress."""

    session_start_s: float
    started_at: float  # epoch seconds when the queries were started
    done_at: dict[str, float]  # epoch seconds when each job had read its whole input
    done_batch: dict[str, int]
    progresses: dict[str, list[Progress]]
    memory: dict[str, Any]  # peak RSS of the driver's Python, the JVM and the Python workers
    stored_state: dict[str, Any]  # per bucketed job: keys and bytes per key after its last batch

    @property
    def wall_s(self) -> float:
        return self.done_at[METRICS] - self.started_at


def run_pipeline(settings: Settings, timeout_s: float) -> PipelineRun:
    """Start the session (not timed), then the three queries (timed) until they drain."""
    from spark_jobs.streaming.spark_session import build_session

    clock = Stopwatch()
    spark = build_session(settings, app_name="tideline-bench-throughput")
    session_start_s = clock.elapsed()
    jobs: RunningJobs | None = None
    try:
        started_at = time.time()
        with peak_memory() as memory:
            jobs = start_jobs(spark, settings, JOBS)
            done = wait_until_drained(jobs, settings, timeout_s)
        progresses = {name: progress_list(q) for name, q in jobs.queries.items()}
        jobs.stop()
        jobs = None
        stored = {name: stored_state(spark, settings, name, progresses[name])
                  for name in BUCKETED_JOBS}
    finally:
        if jobs is not None:
            jobs.stop()
        spark.stop()
    return PipelineRun(
        session_start_s, started_at, {n: batch_end_s(p) for n, p in done.items()},
        {n: p["batchId"] for n, p in done.items()}, progresses, memory.report(), stored,
    )


def stored_state(spark: Any, settings: Settings, name: str,
                 progresses: Sequence[Progress]) -> dict[str, Any]:
    """The job's bucket state after its last batch (keys = users held)."""
    batch = max(p["batchId"] for p in progresses)
    try:
        return bucket_state(spark, settings.lake.checkpoint(name), batch,
                            settings.jobs.state_buckets)
    except Exception as exc:  # a reader limitation must not lose the run's other figures
        return {"batch": batch, "error": str(exc).splitlines()[0][:300]}


# ---------------------------------------------------------------- reports


def job_report(run: PipelineRun, name: str) -> dict[str, Any]:
    """Rows/s, batch duration percentiles, time shares and state of one job's timed batches."""
    batches = [
        p for p in executed_batches(run.progresses[name]) if p["batchId"] <= run.done_batch[name]
    ]
    rows = sum(p["numInputRows"] for p in batches)
    durations = [p["durationMs"]["triggerExecution"] for p in batches]
    busy_s = sum(durations) / 1000
    return {
        "input_rows": rows,
        "batches": len(batches),
        "batches_with_data": sum(1 for p in batches if p["numInputRows"] > 0),
        "done_after_s": round(run.done_at[name] - run.started_at, 2),
        "busy_s": round(busy_s, 2),
        "rows_per_s_in_batches": round(rows / busy_s) if busy_s else 0,
        "rows_per_s_wall": round(rows / run.wall_s),
        "batch_ms": percentiles(durations, (50, 95)),
        "first_batch_ms": durations[0] if durations else None,
        "time_shares": time_shares(batches),
        "state": state_report(batches),
    }


def time_shares(batches: Sequence[Progress]) -> dict[str, float]:
    """Share of summed triggerExecution per durationMs component (plus the unnamed rest)."""
    total = sum(p["durationMs"]["triggerExecution"] for p in batches)
    if not total:
        return {}
    sums: dict[str, int] = defaultdict(int)
    for progress in batches:
        for key, ms in progress["durationMs"].items():
            if key != "triggerExecution":
                sums[key] += ms
    shares = {k: round(v / total, 3) for k, v in sorted(sums.items(), key=lambda kv: -kv[1])}
    shares["other"] = round(max(0.0, 1 - sum(sums.values()) / total), 3)
    return shares


def state_report(batches: Sequence[Progress]) -> list[dict[str, Any]]:
    """Per stateful operator: state at the last timed batch, the peak, and bytes per row."""
    if not batches or not batches[-1].get("stateOperators"):
        return []
    reports = []
    for index, last in enumerate(batches[-1]["stateOperators"]):
        series = [p["stateOperators"][index] for p in batches if p.get("stateOperators")]
        peak = max(series, key=lambda op: op.get("numRowsTotal", 0))
        reports.append({
            "operator": last.get("operatorName"),
            "last": _state_numbers(last),
            "peak_rows": _state_numbers(peak),
        })
    return reports


def _state_numbers(op: dict[str, Any]) -> dict[str, Any]:
    rows = op.get("numRowsTotal", 0)
    memory = op.get("memoryUsedBytes", 0)
    custom = op.get("customMetrics", {})
    sst = custom.get("rocksdbSstFileSize")
    return {
        "numRowsTotal": rows,
        "memoryUsedBytes": memory,
        "memory_bytes_per_row": round(memory / rows) if rows else None,
        "sst_bytes_per_row": round(sst / rows) if rows and sst else None,
        "customMetrics": custom,
    }


# ---------------------------------------------------------------- the Python ceiling


@dataclass
class Replay:
    rows: int
    seconds: float
    deltas: int
    peak_active_users: int
    peak_state_bytes: int  # pickled state of all users at its peak (roundtrip only)
    users_at_peak_bytes: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "seconds": round(self.seconds, 3),
            "rows_per_s": round(self.rows / self.seconds) if self.seconds else 0,
            "deltas": self.deltas,
            "peak_active_users": self.peak_active_users,
            "peak_state_bytes": self.peak_state_bytes or None,
            "state_bytes_per_active_user": (
                round(self.peak_state_bytes / self.users_at_peak_bytes)
                if self.peak_state_bytes else None
            ),
        }


def clean_rows(settings: Settings) -> list[tuple[int, int, Any]]:
    """What experiment_metrics read, from raw_events/raw_activations (the filters write the
    same rows to Delta and Kafka): (ts, user, event_type | activation fields), by ts."""
    from spark_jobs.streaming.lake.delta import read_arrow

    events = read_arrow(settings.lake.table(TABLE_RAW_EVENTS),
                        columns=["ts", "user_id", "event_type"]).to_pydict()
    acts = read_arrow(
        settings.lake.table(TABLE_RAW_ACTIVATIONS),
        columns=["ts", "user_id", "experiment_hash", "experiment_group", "group_ramp_time",
                 "is_control"],
    ).to_pydict()
    rows: list[tuple[int, int, Any]] = list(
        zip(events["ts"], events["user_id"], events["event_type"], strict=True)
    )
    fields = zip(acts["experiment_hash"], acts["experiment_group"], acts["group_ramp_time"],
                 acts["is_control"], strict=True)
    rows += zip(acts["ts"], acts["user_id"], fields, strict=True)
    rows.sort(key=lambda row: row[0])
    return rows


def replay(
    rows: Sequence[tuple[int, int, Any]], params: MetricParams, lateness_ms: int,
    roundtrip: bool,
) -> Replay:
    """Feed UserMetricsState one window of event time at a time, grouped by user, as the
    operator does per micro-batch; due users are advanced like expired timers. With
    `roundtrip` every touched user's state is pickled and unpickled, as the state store does."""
    states: dict[int, Any] = {}
    sizes: dict[int, int] = {}
    due: dict[int, int] = {}
    timers: list[tuple[int, int]] = []
    watermark = deltas = peak_users = peak_bytes = users_at_peak = total_bytes = 0

    def load(user: int) -> UserMetricsState:
        held = states.get(user)
        if roundtrip:
            return UserMetricsState.from_bytes(params, held)
        return held if held is not None else UserMetricsState(params)

    def finish(user: int, state: UserMetricsState) -> int:
        nonlocal total_bytes
        emitted = len(state.provisional()) + len(state.advance(watermark))
        total_bytes -= sizes.pop(user, 0)
        if state.is_empty():
            states.pop(user, None)
            due.pop(user, None)
            return emitted
        if roundtrip:
            blob = state.to_bytes()
            states[user] = blob
            sizes[user] = len(blob)
            total_bytes += len(blob)
        else:
            states[user] = state
        wake = state.next_wakeup()
        if wake is not None and due.get(user) != wake:
            due[user] = wake
            heapq.heappush(timers, (wake, user))
        return emitted

    started = time.perf_counter()
    for _, chunk in groupby(rows, key=lambda row: row[0] // params.window_ms):
        by_user: dict[int, list[tuple[int, int, Any]]] = defaultdict(list)
        last_ts = 0
        for row in chunk:
            by_user[row[1]].append(row)
            last_ts = row[0]  # rows come sorted by ts
        for user, user_rows in by_user.items():
            state = load(user)
            for ts, _, what in user_rows:
                if isinstance(what, str):
                    state.add_event(what, ts, watermark)
                else:
                    state.add_activation(*what, ts, watermark)
            deltas += finish(user, state)
        while timers and timers[0][0] <= watermark:
            wake, user = heapq.heappop(timers)
            if due.get(user) == wake:
                del due[user]
                deltas += finish(user, load(user))
        watermark = max(watermark, last_ts - lateness_ms)
        peak_users = max(peak_users, len(states))
        if total_bytes > peak_bytes:
            peak_bytes, users_at_peak = total_bytes, len(states)
    seconds = time.perf_counter() - started
    return Replay(len(rows), seconds, deltas, peak_users, peak_bytes, users_at_peak)


def python_ceiling(settings: Settings) -> dict[str, Any]:
    """Rows/s of the per-user logic alone, in memory and with the state store's pickling."""
    from spark_jobs.experiments.jobs.experiment_metrics import metric_params

    rows = clean_rows(settings)
    params = metric_params(settings)
    lateness = settings.experiments.lateness_ms
    return {
        "in_memory": replay(rows, params, lateness, roundtrip=False).as_dict(),
        "pickle_roundtrip": replay(rows, params, lateness, roundtrip=True).as_dict(),
    }


# ---------------------------------------------------------------- output


def filtered_counts(settings: Settings) -> dict[str, int]:
    """Rows the filters accepted and the records routed to dead letters."""
    from spark_jobs.streaming.lake.delta import load_table

    counts = {}
    for table in (TABLE_RAW_EVENTS, TABLE_RAW_ACTIVATIONS, TABLE_DEAD_LETTERS):
        loaded = load_table(settings.lake.table(table))
        counts[table] = 0 if loaded is None else loaded.to_pyarrow_dataset().count_rows()
    return counts


def summary_lines(result: dict[str, Any]) -> list[str]:
    workload, wall = result["workload"], result["wall"]
    by_topic = workload["by_topic"]
    lines = [
        f"{NAME}: {workload['messages']:,} input messages "
        f"({sum(by_topic[TOPIC_EVENTS].values()):,} events, "
        f"{sum(by_topic[TOPIC_ACTIVATIONS].values()):,} activations; "
        f"{workload['users']:,} users, {workload['event_time_hours']:g} h of event time)",
        f"  end to end: {wall['seconds']:.1f} s -> {wall['input_msg_per_s']:,.0f} msg/s "
        f"(filters done after {wall['filters_done_s']:.1f} s; Spark session start "
        f"{wall['session_start_s']:.1f} s not counted)",
        f"  {'job':20s} {'rows':>9s} {'batches':>7s} {'rows/s batch':>12s} {'rows/s wall':>11s} "
        f"{'p50 ms':>7s} {'p95 ms':>7s}  biggest time shares",
    ]
    for name, job in result["jobs"].items():
        top = ", ".join(f"{k} {v:.0%}" for k, v in list(job["time_shares"].items())[:3])
        lines.append(
            f"  {name:20s} {job['input_rows']:9,d} {job['batches']:7d} "
            f"{job['rows_per_s_in_batches']:12,d} {job['rows_per_s_wall']:11,d} "
            f"{job['batch_ms']['p50']:7.0f} {job['batch_ms']['p95']:7.0f}  {top}"
        )
        for op in job["state"]:
            peak = op["peak_rows"]
            lines.append(
                f"  {'':20s} state {op['operator']}: peak {peak['numRowsTotal']:,} rows, "
                f"{peak['memoryUsedBytes']:,} B memory ({peak['memory_bytes_per_row']} B/row, "
                f"SST {peak['sst_bytes_per_row']} B/row)"
            )
    memory = result.get("memory_peak") or {}
    if memory:
        lines.append(
            f"  peak RSS: driver Python {memory.get('driver_python_mb')} MB, JVM "
            f"{memory.get('jvm_mb')} MB, Python workers {memory.get('python_workers_mb')} MB PSS "
            f"({memory.get('python_worker_count')} at most), total {memory.get('total_mb')} MB")
    for name, stored in (result.get("stored_state") or {}).items():
        lines.append(f"  {name} state after batch {stored.get('batch')}: "
                     + (f"{stored['keys']:,} users, {stored['stored_bytes']:,} B stored, "
                        f"{stored['stored_bytes_per_key']} B per user"
                        if "keys" in stored else stored.get("error", "?")))
    ceiling, spark_rate = result["python_ceiling"], result["jobs"][METRICS]
    if ceiling:
        lines.append(
            f"  Python ceiling (UserMetricsState alone, {ceiling['in_memory']['rows']:,} rows): "
            f"{ceiling['in_memory']['rows_per_s']:,} rows/s in memory, "
            f"{ceiling['pickle_roundtrip']['rows_per_s']:,} with pickling "
            f"({ceiling['pickle_roundtrip']['state_bytes_per_active_user']} B/active user); "
            f"Spark experiment_metrics {spark_rate['rows_per_s_in_batches']:,} rows/s in batches"
        )
    limits = result.get("engine_limits")
    if limits:
        end_to_end = wall["input_msg_per_s"]
        source = limits["source_alone"]["rows_per_s"]
        lines.append(
            f"  engine limits, same topics: source alone {source:,} msg/s "
            f"(pipeline {end_to_end / source:.0%} of it); JVM aggregation "
            f"{limits['aggregation']['rows_per_s']:,} rows/s, JVM join + aggregation "
            f"{limits['join']['rows_per_s']:,} rows/s (pipeline "
            f"{end_to_end / limits['join']['rows_per_s']:.0%} of it)")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    machine = machine_info()
    experiments = {**EXPERIMENTS, **({"pre_exposure": args.pre_exposure}
                                     if args.pre_exposure is not None else {})}
    overrides = {
        "experiments": experiments,
        "jobs": {"trigger": args.trigger, "max_records_per_trigger": args.limit},
        **({"spark": {"master": args.master}} if args.master else {}),
    }
    with sandbox("throughput") as box:
        settings = bench_settings(box, overrides)
        spec = workload_spec(settings, args.messages, args.users)
        workload = preload(spec, settings)
        print(f"pre-loaded {workload['messages']:,} messages for {spec.n_users:,} users; "
              "starting the jobs", flush=True)
        run = run_pipeline(settings, args.timeout)
        workload["accepted"] = filtered_counts(settings)
        ceiling = None if args.no_ceiling else python_ceiling(settings)
        limits = None
        if args.limits:
            from bench.engine_limits import experiment_limits

            print("measuring the engine's limits on the same topics", flush=True)
            limits = experiment_limits(settings)
    result = {
        "benchmark": NAME,
        "machine": machine,
        "params": {"messages": args.messages, "users": spec.n_users, "limit": args.limit,
                   "trigger": args.trigger, "experiments": experiments, "seed": SEED,
                   "master": settings.spark.master},
        "workload": workload,
        "wall": {
            "seconds": round(run.wall_s, 2),
            "input_msg_per_s": round(workload["messages"] / run.wall_s),
            "filters_done_s": round(max(run.done_at[f] for f in FILTERS) - run.started_at, 2),
            "session_start_s": round(run.session_start_s, 2),
        },
        "jobs": {name: job_report(run, name) for name in JOBS},
        "memory_peak": run.memory,
        "stored_state": run.stored_state,
        "python_ceiling": ceiling,
        "engine_limits": limits,
    }
    publish_result(NAME, args.out, result, summary_lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
