"""Alert latency of fraud_rules: a transaction's arrival in Kafka -> its alert's arrival in Kafka.

For each rate, a fresh broker and lake: the ten benchmark rules are sent, the job starts as a
query with a processing-time trigger (default 0: as soon as possible), and once it runs
unhindered a separate process sends transactions at a steady rate for `--seconds`, with
eventTime = Kafka message timestamp = wall clock at sending. Afterwards every alert message
gives latency = its Kafka timestamp - its triggering transaction's eventTime (both stamped by
producers on this machine's clock). The first `--warmup` seconds of traffic are discarded.

The rules are sent before the job starts: the job reads rules and transactions aligned on
Kafka time, and a rules topic that had new data less than `fraud.idle_timeout` ago holds
transactions back at the last rule's time. The run waits that out before the traffic starts;
the stall it causes is reported (`rules_hold_back_s`). `--state` picks the engine's home
(driver: one engine in the sink; spark: transformWithState shards).

Per batch it records Spark's durations (triggerExecution, latestOffset, addBatch, ...), the
plan's share of addBatch (source read + shuffle + transformWithState, i.e. the sink's
`toArrow()`) and the sink's own share (Kafka publishing, Delta commit), and whether the job
kept up (input vs processed rows/s, backlog when the traffic stopped).

    .venv/bin/python -m bench.fraud_latency [--rates 1000,10000] [--seconds 75] [--trigger 0]
        [--shards 2] [--conf KEY=VALUE] [--rule-update-at S] [--label NAME]
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from bench.common import (
    Progress,
    RunningJobs,
    Sandbox,
    batch_end_s,
    bench_settings,
    end_offsets_of,
    executed_batches,
    iso_ms,
    last_progress,
    machine_info,
    offset_targets,
    percentiles,
    progress_list,
    publish_result,
    sandbox,
)
from bench.process_cpu import ProcessCpu
from spark_jobs.contracts.topics import (
    FRAUD_TOPICS,
    TOPIC_FRAUD_ALERTS,
    TOPIC_RULES,
    TOPIC_TRANSACTIONS,
)
from spark_jobs.fraud.traffic import TransactionSpec, benchmark_rules, produce_transactions
from spark_jobs.settings import Settings

NAME = "fraud_latency"
JOB = "fraud_rules"
QS = (50, 95, 99)
DURATIONS = ("triggerExecution", "latestOffset", "getBatch", "queryPlanning", "walCommit",
             "addBatch", "commitOffsets")
SLICE_S = 10


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"bench.{NAME}", description=__doc__.split("\n")[0])
    parser.add_argument("--rates", default="1000,10000",
                        help="transactions/s, comma-separated (default 1000,10000)")
    parser.add_argument("--seconds", type=float, default=75.0,
                        help="traffic per rate in seconds (default 75)")
    parser.add_argument("--warmup", type=float, default=20.0,
                        help="seconds of traffic discarded at the start (default 20)")
    parser.add_argument("--trigger", default="0",
                        help="jobs.trigger (default 0: next batch as soon as one ends)")
    parser.add_argument("--shards", type=int, default=2, help="fraud.shards (default 2)")
    parser.add_argument("--state", default="driver", choices=("driver", "spark"),
                        help="fraud.state (default driver)")
    parser.add_argument("--partitions", type=int, default=2,
                        help="spark.sql.shuffle.partitions (default 2, as the session sets)")
    parser.add_argument("--limit", type=int, default=200_000,
                        help="jobs.max_records_per_trigger (default 200000)")
    parser.add_argument("--bucket", default="0", help="fraud.bucket (default 0: exact)")
    parser.add_argument("--linger-ms", type=int, default=None,
                        help="linger.ms of the traffic's producer (default: the project's, 5):"
                             " the embedded broker slows down with the number of record"
                             " batches per partition (README, Platform findings)")
    parser.add_argument("--snapshot-every", type=int, default=None,
                        help="fraud.snapshot_every (default: the job's, 500 batches)")
    parser.add_argument("--drain", type=float, default=120.0,
                        help="after the traffic, wait at most this long for the job to catch up")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="extra Spark SQL conf for the query (repeatable)")
    parser.add_argument("--rule-update-at", type=float, default=None, metavar="S",
                        help="re-send rule 1 (unchanged) S seconds into the traffic, to see "
                             "what a rule change costs the alerts after it")
    parser.add_argument("--label", default="", help="a name for this configuration")
    parser.add_argument("--out", default=None, help="result JSON (default bench/results/...)")
    return parser.parse_args(argv)


# ---------------------------------------------------------------- the job, instrumented


class _TimedFrame:
    """The micro-batch DataFrame as the sink sees it, timing `toArrow()`: the moment Spark
    runs the plan (source read, shuffle, transformWithState) for this batch."""

    def __init__(self, frame: Any) -> None:
        self._frame = frame
        self.plan_ms = 0.0

    def toArrow(self) -> Any:  # PySpark's name
        started = time.perf_counter()
        table = self._frame.toArrow()
        self.plan_ms += (time.perf_counter() - started) * 1000
        return table

    def __getattr__(self, name: str) -> Any:
        return getattr(self._frame, name)


class TimedSink:
    """FraudAlertsSink with the plan's and the sink's shares of each batch recorded."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.batches: dict[int, dict[str, Any]] = {}
        deliver = inner.deliver

        def counted(table: Any, batch_id: int, *args: Any, **kwargs: Any) -> None:
            """Both paths hand the batch's engine outputs to deliver() (the driver mode in
            the background, maybe after the batch's call returned): count the alerts."""
            kinds = table["kind"].to_pylist() if table.num_rows else []
            self.batches.setdefault(batch_id, {})["alerts"] = kinds.count("alert")
            deliver(table, batch_id, *args, **kwargs)

        inner.deliver = counted

    @property
    def outputs(self) -> Any:  # bench.common closes the producer through this
        return self.inner.outputs

    def __call__(self, batch: Any, batch_id: int) -> None:
        frame = _TimedFrame(batch)
        started = time.perf_counter()
        self.inner(frame, batch_id)
        total_ms = (time.perf_counter() - started) * 1000
        self.batches.setdefault(batch_id, {"alerts": 0}).update({
            "plan_ms": round(frame.plan_ms, 1), "sink_ms": round(total_ms - frame.plan_ms, 1),
            "ended_at": time.time(),
        })

    def close(self) -> None:
        self.inner.close()


def start_timed_job(spark: Any, settings: Settings, available_now: bool = False
                    ) -> RunningJobs:
    """runner.start_job with the sink wrapped in TimedSink (same plan, checkpoint, trigger)."""
    from spark_jobs.streaming.runner import start_job

    query, sink = start_job(spark, settings, JOB, available_now, wrap_sink=TimedSink)
    return RunningJobs({JOB: query}, {JOB: sink})


def send_rules(settings: Settings, at_ms: int | None = None, count: int = 10) -> int:
    from spark_jobs.streaming.kafka.producer import make_producer, produce_all
    from spark_jobs.streaming.kafka.topic_admin import ensure_topics

    ensure_topics(settings.kafka, FRAUD_TOPICS, settings.kafka.partitions)
    rules = benchmark_rules(count)
    stamp = int(time.time() * 1000) if at_ms is None else at_ms
    producer = make_producer(settings.kafka)
    try:
        return produce_all(producer, TOPIC_RULES, [None] * len(rules), rules,
                           [stamp] * len(rules))
    finally:
        producer.flush(10)


def read_rows(jobs: RunningJobs) -> int:
    """Input rows the query has read so far (over every executed batch)."""
    return sum(p.get("numInputRows", 0) for p in executed_batches(progress_list(jobs.queries[JOB])))


def wait_for(condition: Any, jobs: RunningJobs, timeout_s: float, what: str) -> float:
    """Poll until condition() holds; returns the seconds waited."""
    started = time.monotonic()
    while not condition():
        jobs.check()
        if time.monotonic() - started > timeout_s:
            raise TimeoutError(f"{what}: not after {timeout_s:.0f} s")
        time.sleep(0.2)
    return time.monotonic() - started


def unread(jobs: RunningJobs, settings: Settings) -> int:
    """Transactions in Kafka that the query's last batch had not read."""
    targets = offset_targets(settings.kafka, [TOPIC_TRANSACTIONS, TOPIC_RULES])
    last = last_progress(jobs.queries[JOB])
    read = end_offsets_of(last) if last else {}
    return sum(max(0, end - read.get(key, 0)) for key, end in targets.items())


# ---------------------------------------------------------------- traffic in its own process


def _produce_child(settings: Settings, rate: float, seconds: float, first_id: int,
                   results: Any, linger_ms: int | None = None) -> None:
    from spark_jobs.streaming.kafka.producer import make_producer

    try:
        extra = {} if linger_ms is None else {"linger.ms": linger_ms}
        report = produce_transactions(settings, rate, seconds,
                                      TransactionSpec(first_id=first_id),
                                      producer=make_producer(settings.kafka, **extra))
        results.put(("ok", report.as_dict()))
    except BaseException as exc:  # reported by the parent
        results.put(("error", repr(exc)))


def run_traffic(jobs: RunningJobs, settings: Settings, rate: float, seconds: float,
                rule_update_at: float | None = None, linger_ms: int | None = None
                ) -> dict[str, Any]:
    """Send the traffic from a separate process (the driver's Python stays free for the
    sink), watching the query; returns the producer's report."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    child = context.Process(target=_produce_child,
                            args=(settings, rate, seconds, 1, results, linger_ms),
                            name="fraud-traffic", daemon=True)
    child.start()
    started = time.monotonic()
    next_report = started + SLICE_S
    updated_at: int | None = None
    try:
        while child.is_alive():
            if (rule_update_at is not None and updated_at is None
                    and time.monotonic() - started >= rule_update_at):
                updated_at = int(time.time() * 1000)
                send_rules(settings, updated_at, count=1)
            jobs.check()
            if time.monotonic() > next_report:
                last = last_progress(jobs.queries[JOB]) or {}
                print(f"  {rate:g}/s: batch {last.get('batchId')}, "
                      f"{last.get('numInputRows')} rows, "
                      f"{last.get('durationMs', {}).get('triggerExecution')} ms",
                      file=sys.stderr, flush=True)
                next_report += SLICE_S
            child.join(0.5)
    finally:
        if child.is_alive():
            child.terminate()
            child.join(10)
    status, payload = results.get(timeout=30)
    if status != "ok":
        raise RuntimeError(f"traffic process failed: {payload}")
    return {**payload, "rule_update_ms": updated_at}


# ---------------------------------------------------------------- measuring


def alert_latencies(settings: Settings) -> tuple[np.ndarray, np.ndarray, int]:
    """(eventTime of the triggering transaction, latency ms) of every alert, and the count
    of distinct alerted transactions."""
    from spark_jobs.streaming.kafka.topic_reader import read_all

    sent, latency, ids = [], [], set()
    for message in read_all(settings.kafka, TOPIC_FRAUD_ALERTS, timeout_s=60):
        event = orjson.loads(message.value or b"{}")["triggeringEvent"]
        sent.append(event["eventTime"])
        latency.append(message.timestamp - event["eventTime"])
        ids.add(event["transactionId"])
    return np.asarray(sent, dtype=np.int64), np.asarray(latency, dtype=np.int64), len(ids)


def check_timestamps(settings: Settings, sample: int = 20_000) -> dict[str, Any]:
    """Transactions' Kafka timestamps equal their eventTime (what the latency relies on):
    checked on the first `sample` messages of every partition."""
    from confluent_kafka import TopicPartition

    from spark_jobs.streaming.kafka.topic_admin import end_offsets, offsets_consumer

    ends = end_offsets(settings.kafka, TOPIC_TRANSACTIONS)
    consumer = offsets_consumer(settings.kafka)
    wanted = {p: min(end, sample) for p, end in ends.items() if end > 0}
    checked = mismatched = 0
    try:
        consumer.assign([TopicPartition(TOPIC_TRANSACTIONS, p, 0) for p in wanted])
        deadline = time.monotonic() + 60
        while wanted and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None or message.error() is not None:
                continue
            partition = message.partition()
            if partition not in wanted or message.offset() >= wanted[partition]:
                continue
            checked += 1
            mismatched += orjson.loads(message.value())["eventTime"] != message.timestamp()[1]
            if message.offset() + 1 >= wanted[partition]:
                del wanted[partition]
    finally:
        consumer.close()
    return {"checked": checked, "timestamp_differs_from_event_time": mismatched}


def _stats(values: Sequence[float] | np.ndarray) -> dict[str, float]:
    array = np.asarray(values, dtype=float)
    if len(array) == 0:
        return {**percentiles(array, QS), "max": 0.0, "mean": 0.0, "n": 0}
    return {**percentiles(array, QS), "max": round(float(array.max()), 1),
            "mean": round(float(array.mean()), 1), "n": len(array)}


def batch_breakdown(batches: list[Progress], timings: dict[int, dict[str, Any]]
                    ) -> dict[str, Any]:
    """Percentiles of every duration of the given batches, the plan/sink split of addBatch,
    rows per batch and the state operator's own timings."""
    found: dict[str, Any] = {}
    for key in DURATIONS:
        found[key] = _stats([p["durationMs"].get(key, 0) for p in batches])
    timed = [timings[p["batchId"]] for p in batches if "plan_ms" in timings.get(p["batchId"], {})]
    found["addBatch.plan"] = _stats([t["plan_ms"] for t in timed])
    found["addBatch.sink"] = _stats([t["sink_ms"] for t in timed])
    found["rows_per_batch"] = _stats([p.get("numInputRows", 0) for p in batches])
    found["alerts_per_batch"] = _stats([t.get("alerts", 0) for t in timed])
    operators = [p["stateOperators"][0] for p in batches if p.get("stateOperators")]
    for key in ("allUpdatesTimeMs", "allRemovalsTimeMs", "commitTimeMs"):
        found[f"state.{key}"] = _stats([op.get(key, 0) for op in operators])
    if operators:
        last = operators[-1]
        found["state_at_end"] = {
            "numRowsTotal": last.get("numRowsTotal"),
            "memoryUsedBytes": last.get("memoryUsedBytes"),
            "customMetrics": last.get("customMetrics", {}),
        }
    return found


def steady_batches(progresses: list[Progress], from_ms: int, to_ms: int) -> list[Progress]:
    return [p for p in executed_batches(progresses) if from_ms <= iso_ms(p["timestamp"]) <= to_ms]


def latency_slices(sent: np.ndarray, latency: np.ndarray, first_ms: int) -> list[dict[str, Any]]:
    """p50/p99 per SLICE_S seconds of traffic: a rising tail means the job fell behind."""
    out = []
    if len(sent) == 0:
        return out
    offsets = (sent - first_ms) // (SLICE_S * 1000)
    for index in range(int(offsets.max()) + 1):
        chosen = latency[offsets == index]
        if len(chosen):
            out.append({"from_s": index * SLICE_S, **percentiles(chosen, (50, 99)),
                        "n": len(chosen)})
    return out


# ---------------------------------------------------------------- one rate


def spark_conf(args: argparse.Namespace) -> dict[str, str]:
    extra = dict(item.split("=", 1) for item in args.conf)
    return {"spark.sql.shuffle.partitions": str(args.partitions), **extra}


def overrides_of(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "jobs": {"trigger": args.trigger, "max_records_per_trigger": args.limit},
        "fraud": {"shards": args.shards, "bucket": args.bucket, "state": args.state,
                  **({} if args.snapshot_every is None
                     else {"snapshot_every": args.snapshot_every})},
        "spark": {"conf": spark_conf(args)},
    }


def run_rate(spark: Any, args: argparse.Namespace, rate: float) -> dict[str, Any]:
    with sandbox(f"{NAME}-{int(rate)}") as box:
        settings = bench_settings(box, overrides_of(args))
        for key, value in spark_conf(args).items():
            spark.conf.set(key, value)
        send_rules(settings)
        jobs = start_timed_job(spark, settings)
        try:
            ready_s = wait_for(lambda: read_rows(jobs) >= len(benchmark_rules()), jobs, 300,
                               "rules read")
            # the rules topic holds transactions back until it has been idle this long
            time.sleep(settings.fraud.idle_timeout_ms / 1000 + 2)
            with ProcessCpu() as cpu:
                traffic = run_traffic(jobs, settings, rate, args.seconds, args.rule_update_at,
                                      args.linger_ms)
            backlog_at_stop = unread(jobs, settings)
            try:
                drain_s = round(wait_for(lambda: unread(jobs, settings) == 0, jobs, args.drain,
                                         "drained"), 1)
                drained = True
            except TimeoutError:
                drain_s, drained = args.drain, False
            backlog_at_end = unread(jobs, settings)
            progresses = progress_list(jobs.queries[JOB])
        finally:
            jobs.stop(finish_s=5.0)
        timings = dict(jobs.sinks[JOB].batches)
        sent, latency, alerted = alert_latencies(settings)
        stamps = check_timestamps(settings)
    first_ms, last_ms = traffic["first_ms"], traffic["last_ms"]
    steady_from = first_ms + int(args.warmup * 1000)
    chosen = (sent >= steady_from) & (sent <= last_ms)
    batches = steady_batches(progresses, steady_from, last_ms)
    during = [p for p in executed_batches(progresses) if iso_ms(p["timestamp"]) >= first_ms]
    processed = sum(p.get("numInputRows", 0) for p in during)
    processed_s = (max((batch_end_s(p) for p in during), default=first_ms / 1000)
                   - first_ms / 1000)
    steady_rows = sum(p.get("numInputRows", 0) for p in batches)
    span_s = (last_ms - steady_from) / 1000
    busy_s = sum(p["durationMs"]["triggerExecution"] for p in batches) / 1000
    return {
        "rate": rate,
        "spark_ready_s": round(ready_s, 1),
        "traffic": traffic,
        "timestamps": stamps,
        "steady_window_s": round(span_s, 1),
        "latency_ms": _stats(latency[chosen]),
        "latency_all_ms": _stats(latency),
        "latency_by_slice": latency_slices(sent, latency, first_ms),
        # % of a core per process role (bench.process_cpu): what takes the machine as it goes
        "cpu_by_slice": cpu.by_slice(first_ms / 1000, SLICE_S),
        "alerts": {"total": len(latency), "steady": int(chosen.sum()),
                   "alerted_transactions": alerted},
        "kept_up": {
            "input_rows_per_s": round(steady_rows / span_s, 1) if span_s > 0 else 0.0,
            "processed_rows_per_s_in_batches": round(steady_rows / busy_s, 1) if busy_s else 0.0,
            "read_since_traffic_start": processed,
            "read_per_s_since_traffic_start": round(processed / processed_s, 1)
            if processed_s > 0 else 0.0,
            "backlog_when_traffic_stopped": backlog_at_stop,
            "drained": drained, "drain_s": drain_s, "backlog_at_end": backlog_at_end,
        },
        "steady_batches": len(batches),
        "batches": batch_breakdown(batches, timings),
    }


# ---------------------------------------------------------------- output


def cpu_line(slices: list[dict[str, Any]]) -> str:
    """% of a core by role in the first and the last full slice of the traffic."""
    full = slices[:-1] if len(slices) > 1 else slices
    if not full:
        return "CPU: not sampled"
    first, last = full[0], full[-1]
    roles = sorted({*first, *last} - {"from_s", "total"},
                   key=lambda role: -last.get(role, 0.0))
    return (f"% of a core, {first['from_s']:g} s -> {last['from_s']:g} s: " + ", ".join(
        f"{role} {first.get(role, 0.0):.0f} -> {last.get(role, 0.0):.0f}" for role in roles)
        + f"; total {first['total']:.0f} -> {last['total']:.0f}")


def summary_lines(result: dict[str, Any]) -> list[str]:
    params = result["params"]
    lines = [f"{NAME} ({params['label'] or 'default'}): trigger {params['trigger']}, shards "
             f"{params['shards']}, shuffle partitions {params['partitions']}, "
             f"{params['seconds']:g} s per rate, first {params['warmup']:g} s discarded"]
    for run in result["runs"]:
        lat, kept, batches = run["latency_ms"], run["kept_up"], run["batches"]
        latency = (f"p50 {lat['p50']:.0f} ms, p95 {lat['p95']:.0f} ms, p99 {lat['p99']:.0f} ms, "
                   f"max {lat['max']:.0f} ms ({lat['n']} alerts)" if lat["n"] else
                   "no alert of the steady window was produced in time (the job fell behind)")
        lines.append(
            f"  {run['rate']:>6g}/s (sent {run['traffic']['rate']:.0f}/s): alert latency "
            f"{latency}; read {kept['read_per_s_since_traffic_start']:.0f} rows/s, backlog at "
            f"stop {kept['backlog_when_traffic_stopped']}, drained {kept['drained']} in "
            f"{kept['drain_s']} s")
        lines.append(
            "          batch p50/p99 ms: " + ", ".join(
                f"{key} {batches[key]['p50']:.0f}/{batches[key]['p99']:.0f}"
                for key in ("triggerExecution", "latestOffset", "queryPlanning", "addBatch",
                            "addBatch.plan", "addBatch.sink", "commitOffsets", "walCommit"))
            + f"; rows/batch p50 {batches['rows_per_batch']['p50']:.0f}")
        lines.append("          " + cpu_line(run["cpu_by_slice"]))
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    from spark_jobs.streaming.spark_session import build_session

    args = parse_args(argv)
    rates = [float(r) for r in args.rates.split(",") if r.strip()]
    machine = machine_info()
    runs = []
    with tempfile.TemporaryDirectory(prefix=f"tideline-bench-{NAME}-") as folder:
        # the session's settings only: each rate gets its own broker and lake
        box = Sandbox("127.0.0.1:9", Path(folder))
        spark = build_session(bench_settings(box, overrides_of(args)),
                              app_name=f"tideline-bench-{NAME}")
        try:
            for rate in rates:
                print(f"{rate:g} transactions/s for {args.seconds:g} s", flush=True)
                runs.append(run_rate(spark, args, rate))
        finally:
            spark.stop()
    result = {
        "benchmark": NAME,
        "machine": machine,
        "params": {"rates": rates, "seconds": args.seconds, "warmup": args.warmup,
                   "trigger": args.trigger, "shards": args.shards, "partitions": args.partitions,
                   "limit": args.limit, "bucket": args.bucket, "label": args.label,
                   "conf": spark_conf(args), "rule_update_at": args.rule_update_at,
                   "linger_ms": args.linger_ms, "snapshot_every": args.snapshot_every,
                   "rules": len(benchmark_rules()), "spec": TransactionSpec().__dict__},
        "runs": runs,
    }
    publish_result(NAME if not args.label else f"{NAME}-{args.label}", args.out, result,
                   summary_lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
