"""fraud_rules at saturation, and its state size per key in exact vs bucketed mode.

Two parts over the same generated traffic (spark_jobs.fraud.traffic, ten benchmark rules,
event time advancing at `--event-rate` transactions per second, Kafka time = event time):

1. The job (`--state`: `driver`, the default, one engine in the foreachBatch sink; or
   `spark`, the sharded transformWithStateInPandas path): the transactions are pre-loaded into a
   fresh broker, the job runs with an available-now trigger until it has read them all, and
   the run reports transactions/s end to end (query start to end, first batch included) and
   within batches, where batch time goes, and the state at the end. `spark`: the RocksDB
   state (rows, bytes), and each shard's snapshot and change logs read back with Spark's
   state data source (bytes stored, and the engine store they rebuild, measured per (rule,
   key) window as for the driver). `driver`: the engine's windows in the sink's
   store (per (rule, key) window the pickled bytes of its state as a snapshot holds it, and
   its entries), and the bytes of the engine state files (change files, snapshots) in the
   checkpoint. One run per `--configs` entry `<bucket>:<shards>` (bucket 0 = exact; shards
   only matter for `spark`).
2. The pure engine (FraudEngine over MemoryStore(pickled=True), one core, no Spark): the same
   transactions with the job's watermark (max eventTime - fraud.lateness) and clean-up
   timers, in exact and bucketed mode: transactions/s, and per (rule, key) window its pickled
   bytes and entries (values or buckets) at the end.

With `--state-calls` it also times single Python state calls with a trivial processor (what
one MapState getValue/updateValue costs, and whether two shard keys share a task).

    .venv/bin/python -m bench.fraud_throughput [--transactions N] [--spark-transactions M]
        [--event-rates 1000,100] [--configs 0:2,1m:2] [--bucket 1m] [--state driver|spark]
        [--state-calls]
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from bench.common import (
    Progress,
    Stopwatch,
    bench_settings,
    executed_batches,
    machine_info,
    percentiles,
    progress_list,
    publish_result,
    sandbox,
)
from bench.fraud_latency import JOB, TimedSink, batch_breakdown, start_timed_job
from spark_jobs.config.durations import parse_duration_ms
from spark_jobs.contracts.topics import (
    FRAUD_TOPICS,
    TOPIC_FRAUD_ALERTS,
    TOPIC_RULES,
    TOPIC_TRANSACTIONS,
)
from spark_jobs.fraud.core.changelog import LoggedStore, plain_state
from spark_jobs.fraud.core.engine import FraudEngine, MemoryStore
from spark_jobs.fraud.core.windows import window_size
from spark_jobs.fraud.jobs.engine_state_files import CHANGES, SNAPSHOT, EngineStateFiles
from spark_jobs.fraud.traffic import (
    TransactionSpec,
    benchmark_rules,
    generate_transactions,
    transaction_text,
)
from spark_jobs.settings import Settings

NAME = "fraud_throughput"
LATENESS = "2m"  # the fraud.lateness default
QS = (50, 99)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"bench.{NAME}", description=__doc__.split("\n")[0])
    parser.add_argument("--transactions", type=int, default=300_000,
                        help="transactions through the pure engine (default 300000)")
    parser.add_argument("--spark-transactions", type=int, default=60_000,
                        help="transactions pre-loaded for each job run (default 60000)")
    parser.add_argument("--event-rates", default="1000,100",
                        help="engine part: event time advances this many transactions per "
                             "second, one profile each (default 1000,100); the job runs use "
                             "the first")
    parser.add_argument("--configs", default="0:2,1m:2",
                        help="job runs as <bucket>:<shards>, comma-separated (default 0:2,1m:2;"
                             " empty: engine only)")
    parser.add_argument("--bucket", default="1m", help="bucketed mode of the engine part")
    parser.add_argument("--state", default="driver", choices=("driver", "spark"),
                        help="fraud.state of the job runs (default driver)")
    parser.add_argument("--limit", type=int, default=20_000,
                        help="jobs.max_records_per_trigger of the job runs (default 20000)")
    parser.add_argument("--partitions", type=int, default=2,
                        help="spark.sql.shuffle.partitions (default 2)")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="give up on a job run after this many seconds")
    parser.add_argument("--state-calls", action="store_true",
                        help="also time single Python state calls (a trivial processor)")
    parser.add_argument("--master", default=None,
                        help="spark.master of the job runs (default local[2]; e.g. a standalone "
                             "cluster's spark://127.0.0.1:7077, as bench.cluster_scaling does)")
    parser.add_argument("--out", default=None, help="result JSON (default bench/results/...)")
    return parser.parse_args(argv)


def traffic(count: int, event_rate: float, start_ms: int) -> list[dict[str, Any]]:
    return list(generate_transactions(TransactionSpec(), count, start_ms, event_rate))


# ---------------------------------------------------------------- the pure engine


def run_engine(transactions: list[dict[str, Any]], bucket_ms: int, batch: int
               ) -> dict[str, Any]:
    """The engine alone, fed like the job: in batches of `batch` transactions, each with
    the watermark of the batches before (max eventTime - lateness), then the clean-up timer
    when the watermark has passed it."""
    lateness = parse_duration_ms(LATENESS)
    store = MemoryStore(pickled=True)
    engine = FraudEngine(store, alert_on_late=False, bucket_ms=bucket_ms)
    for text in benchmark_rules():
        engine.on_rule(text, transactions[0]["eventTime"] - 1000)
    texts = [transaction_text(t) for t in transactions]
    alerts = cleanups = 0
    watermark = -(2**62)
    timer: int | None = None  # the cleanup timer registered by the batch before
    cleanup_s = 0.0
    started, cpu_started = time.perf_counter(), time.process_time()
    for first in range(0, len(texts), batch):
        for text in texts[first:first + batch]:
            alerts += len(engine.on_transaction(text, watermark, 0))
        if timer is not None and timer <= watermark:  # Spark: handleExpiredTimer
            begun = time.perf_counter()
            engine.cleanup(watermark)
            cleanup_s += time.perf_counter() - begun
            cleanups += 1
        timer = engine.next_cleanup_ms(watermark)
        last = max(t["eventTime"] for t in transactions[first:first + batch])
        watermark = max(watermark, last - lateness)
    elapsed = time.perf_counter() - started
    cpu_s = time.process_time() - cpu_started  # what a shared, loaded box leaves comparable
    return {
        "bucket_ms": bucket_ms,
        "transactions": len(transactions),
        "batch": batch,
        "tx_per_s": round(len(transactions) / elapsed),
        "tx_per_s_cpu": round(len(transactions) / cpu_s),
        "cleanup_share": round(cleanup_s / elapsed, 3),
        "alerts": alerts,
        "cleanups": cleanups,
        "state": engine_state(store),
    }


def engine_state(store: MemoryStore) -> dict[str, Any]:
    """Pickled bytes and entries per (rule, key) window, per rule and overall. The windows
    of a MemoryStore(pickled=True) are their pickles, those of the driver sink's LoggedStore
    objects; both are measured pickled as a snapshot holds them (plain lists)."""
    per_rule: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for rule_id, keys in store.by_rule.items():
        for stored in keys.values():
            window = pickle.loads(stored) if store.pickled else stored
            # measured as persisted: an exact window as its plain (times, values) lists
            blob = pickle.dumps(plain_state(window), protocol=pickle.HIGHEST_PROTOCOL)
            per_rule[rule_id].append((len(blob), window_size(window)))
    everything = [pair for pairs in per_rule.values() for pair in pairs]
    seen_bytes = len(pickle.dumps(store.seen, protocol=pickle.HIGHEST_PROTOCOL))
    return {
        "windows": len(everything),
        "window_bytes": sum(b for b, _ in everything),
        "entries": sum(e for _, e in everything),
        "per_window": _sizes(everything),
        "by_rule": {str(rule): {"windows": len(pairs), **_sizes(pairs)}
                    for rule, pairs in sorted(per_rule.items())},
        "seen_ids": len(store.seen),
        "seen_bytes_pickled": seen_bytes,
    }


def _sizes(pairs: list[tuple[int, int]]) -> dict[str, Any]:
    if not pairs:
        return {}
    size = np.asarray([b for b, _ in pairs], dtype=float)
    entries = np.asarray([e for _, e in pairs], dtype=float)
    return {
        "bytes_mean": round(float(size.mean()), 1),
        "bytes": {**percentiles(size, QS), "max": int(size.max())},
        "entries_mean": round(float(entries.mean()), 2),
        "entries": {**percentiles(entries, QS), "max": int(entries.max())},
        "bytes_per_entry": round(float(size.sum() / max(entries.sum(), 1)), 1),
    }


# ---------------------------------------------------------------- the job


def preload(settings: Settings, transactions: list[dict[str, Any]]) -> dict[str, Any]:
    from spark_jobs.streaming.kafka.producer import make_producer, produce_all
    from spark_jobs.streaming.kafka.topic_admin import ensure_topics

    ensure_topics(settings.kafka, FRAUD_TOPICS, settings.kafka.partitions)
    producer = make_producer(settings.kafka)
    clock = Stopwatch()
    rules = benchmark_rules()
    first = transactions[0]["eventTime"]
    produce_all(producer, TOPIC_RULES, [None] * len(rules), rules, [first - 1000] * len(rules))
    produce_all(producer, TOPIC_TRANSACTIONS, [str(t["payeeId"]) for t in transactions],
                [transaction_text(t) for t in transactions],
                [t["eventTime"] for t in transactions])
    return {"transactions": len(transactions), "rules": len(rules),
            "produce_s": round(clock.elapsed(), 1)}


def stored_state(spark: Any, settings: Settings) -> dict[str, Any]:
    """The job's shard states read back with Spark's state data source (processors/
    shard_state.py): per shard the bytes of its snapshot and change logs as stored, and its
    engine store rebuilt from them (per (rule, key) window the pickled bytes of its state as
    a snapshot holds it, and its entries: engine_state); which shuffle partition (task) each
    shard key lives in."""
    from spark_jobs.fraud.processors.shard_state import read_shards

    try:
        stored = read_shards(spark, settings.lake.checkpoint(JOB))
    except Exception as exc:  # a reader limitation must not lose the run's other numbers
        return {"error": str(exc).splitlines()[0][:300]}
    shards = {str(shard): {
        "partition": s.partition, "version": s.head.seq, "snapshot_bytes": s.snapshot_bytes,
        "change_logs": s.change_logs, "change_bytes": s.change_bytes,
        "engine": engine_state(s.store)} for shard, s in sorted(stored.items())}
    windows = sum(s["engine"]["windows"] for s in shards.values())
    total = sum(s.snapshot_bytes + s.change_bytes for s in stored.values())
    return {"windows": windows, "stored_bytes": total,
            "stored_bytes_per_window": round(total / windows, 1) if windows else None,
            "shards": shards}


def driver_state(sink: Any) -> dict[str, Any]:
    """The driver path's state at the end, shard by shard, as its files in the checkpoint
    rebuild it (the engines of shards 1.. live in processes of their own): the windows in each
    engine's store (engine_state), a snapshot's size, and the state files (bytes on disk)."""
    import pyarrow.fs as pafs

    shards: dict[str, Any] = {}
    for shard in range(sink.settings.fraud.shards):
        files = EngineStateFiles(sink.checkpoint, shard)
        found: dict[str, Any] = {}
        if sink._applied is not None:
            snapshot, changes, _ = files.state_after(sink._applied)
            store = LoggedStore.restore(snapshot)
            for change in changes:
                store.apply_changes(change)
            found = {**engine_state(store), "snapshot_bytes_if_taken": len(store.snapshot())}
        infos = files.filesystem.get_file_info(pafs.FileSelector(files.folder))
        kinds: dict[str, list[int]] = {"changes": [], "snapshots": []}
        for info in infos:
            if info.base_name.startswith(CHANGES):
                kinds["changes"].append(info.size)
            elif info.base_name.startswith(SNAPSHOT):
                kinds["snapshots"].append(info.size)
        found["files"] = {
            "bytes_on_disk": sum(info.size for info in infos if info.size is not None),
            **{f"{kind}_files": len(sizes) for kind, sizes in kinds.items()},
            **{f"{kind}_bytes": sum(sizes) for kind, sizes in kinds.items()},
        }
        shards[str(shard)] = found
    return {"windows": sum(s.get("windows", 0) for s in shards.values()), "shards": shards}


def published_alerts(settings: Settings) -> dict[str, int]:
    """The alert messages in the job's Kafka topic, and their distinct keys (rule, transaction):
    a duplicate alert would show as more messages than keys."""
    from spark_jobs.streaming.kafka.topic_reader import read_all

    messages = read_all(settings.kafka, TOPIC_FRAUD_ALERTS, timeout_s=60)
    return {"messages": len(messages), "distinct_keys": len({m.key for m in messages})}


def run_job(spark: Any, args: argparse.Namespace, bucket: str, shards: int,
            transactions: list[dict[str, Any]]) -> dict[str, Any]:
    overrides = {
        "jobs": {"max_records_per_trigger": args.limit},
        "fraud": {"bucket": bucket, "shards": shards, "lateness": LATENESS, "state": args.state},
        "spark": {"conf": {"spark.sql.shuffle.partitions": str(args.partitions)}},
    }
    with sandbox(f"{NAME}-{args.state}-{bucket}-{shards}") as box:
        settings = bench_settings(box, overrides)
        spark.conf.set("spark.sql.shuffle.partitions", str(args.partitions))
        loaded = preload(settings, transactions)
        print(f"  job ({args.state} state): bucket {bucket}, shards {shards}: "
              f"{len(transactions):,} transactions", file=sys.stderr, flush=True)
        clock = Stopwatch()
        jobs = start_timed_job(spark, settings, available_now=True)
        query = jobs.queries[JOB]
        try:
            finished = query.awaitTermination(args.timeout)
            wall_s = clock.elapsed()
            jobs.check()
            progresses = progress_list(query)
        finally:
            stopping = Stopwatch()  # the sink's close delivers a batch still in the background
            jobs.stop(finish_s=5.0)
            stop_s = stopping.elapsed()
        sink: TimedSink = jobs.sinks[JOB]
        published = published_alerts(settings)
        alerts = sum(t["alerts"] for t in sink.batches.values())
        # spark: the RocksDB state read back; driver: the sink's engine and its state files
        windows = (stored_state(spark, settings) if args.state == "spark"
                   else driver_state(sink.inner))
    batches = executed_batches(progresses)
    rows = sum(p.get("numInputRows", 0) for p in batches)
    later = batches[1:]
    later_rows = sum(p.get("numInputRows", 0) for p in later)
    later_s = sum(p["durationMs"]["triggerExecution"] for p in later) / 1000
    breakdown = batch_breakdown(batches, sink.batches)
    return {
        "state": args.state,
        "bucket": bucket,
        "shards": shards,
        "preload": loaded,
        "finished": bool(finished),
        "wall_s": round(wall_s, 1),
        "rows_read": rows,
        "tx_per_s_end_to_end": round(rows / wall_s, 1) if wall_s else 0.0,
        "stop_s": round(stop_s, 2),
        "tx_per_s_through_stop": round(rows / (wall_s + stop_s), 1) if wall_s else 0.0,
        "tx_per_s_after_first_batch": round(later_rows / later_s, 1) if later_s else 0.0,
        "batches": len(batches),
        "first_batch_s": round(batches[0]["durationMs"]["triggerExecution"] / 1000, 1)
        if batches else None,
        "alerts": alerts,
        "alerts_published": published,
        "breakdown": breakdown,
        "per_batch": [{"batch": p["batchId"], "rows": p.get("numInputRows", 0),
                       "trigger_ms": p["durationMs"].get("triggerExecution"),
                       "latest_offset_ms": p["durationMs"].get("latestOffset"),
                       **sink.batches.get(p["batchId"], {})} for p in batches],
        "state_by_batch": state_series(batches),
        "stored_state": windows,
    }


def state_series(batches: list[Progress]) -> list[dict[str, Any]]:
    """RocksDB rows and bytes after each batch: how state grows with the traffic read."""
    out, read = [], 0
    for p in batches:
        read += p.get("numInputRows", 0)
        for op in p.get("stateOperators", [])[:1]:
            custom = op.get("customMetrics", {})
            out.append({"batch": p["batchId"], "read": read, "rows": op.get("numRowsTotal"),
                        "memoryUsedBytes": op.get("memoryUsedBytes"),
                        "sstFileSize": custom.get("rocksdbSstFileSize"),
                        "ms": p["durationMs"]["triggerExecution"]})
    return out


# ---------------------------------------------------------------- the state API alone


PROBE_OUTPUT = "shard INT, n LONG, ms DOUBLE"
PROBE_PAYLOAD = b"x" * 40  # about a stored window's size


class CallsProcessor(StatefulProcessor):
    """`calls` MapState getValue + updateValue pairs per input row, and the time they took."""

    def __init__(self, calls: int) -> None:
        self.calls = calls

    def init(self, handle: StatefulProcessorHandle) -> None:
        from pyspark.sql.types import BinaryType, StringType, StructField, StructType

        self.map = handle.getMapState("m", StructType([StructField("k", StringType())]),
                                      StructType([StructField("v", BinaryType())]))

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any
                        ) -> Iterator[Any]:
        from pyspark.sql import Row

        started = time.perf_counter()
        count = 0
        for row in rows:
            for call in range(self.calls):
                entry = (f"{row.id % 50_000}:{call}",)
                self.map.getValue(entry)
                self.map.updateValue(entry, (PROBE_PAYLOAD,))
            count += 1
        yield Row(shard=int(key[0]), n=count, ms=(time.perf_counter() - started) * 1000)

    def close(self) -> None:
        pass


def state_call_cost(spark: Any, rows: int = 20_000, calls: Sequence[int] = (0, 5),
                    shard_sets: Sequence[tuple[int, ...]] = ((0, 1), (0, 2))
                    ) -> list[dict[str, Any]]:
    """What one Python state call costs: a trivial transformWithState whose processor makes
    `calls` MapState getValue + updateValue pairs per input row, over `rows` rows split
    between shard keys, run once per (shard keys, calls). Shard keys 0 and 1 hash to the
    same shuffle partition (2 partitions), 0 and 2 to different ones."""
    import os
    import tempfile

    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark import cloudpickle
    from pyspark.sql import functions as F

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers need not import bench
    found = []
    with tempfile.TemporaryDirectory(prefix=f"tideline-bench-{NAME}-calls-") as folder:
        for shards in shard_sets:
            source = os.path.join(folder, "in-" + "-".join(map(str, shards)))
            os.makedirs(source)
            ids = list(range(rows))
            pq.write_table(pa.table({"id": ids, "s": [shards[i % len(shards)] for i in ids]}),
                           os.path.join(source, "part.parquet"))
            for count in calls:
                frame = (spark.readStream.schema("id long, s long").parquet(source)
                         .withColumn("shard", F.col("s").cast("int")))
                out = frame.groupBy("shard").transformWithState(
                    CallsProcessor(count), PROBE_OUTPUT, "append", "None")
                inside: dict[int, float] = {}

                def sink(batch: Any, _batch_id: int, inside: dict[int, float] = inside) -> None:
                    inside.update({r.shard: r.ms for r in batch.collect()})

                checkpoint = os.path.join(folder, f"cp-{'-'.join(map(str, shards))}-{count}")
                query = (out.writeStream.foreachBatch(sink)
                         .option("checkpointLocation", checkpoint)
                         .trigger(availableNow=True).start())
                query.awaitTermination()
                batch = next(p for p in progress_list(query) if p.get("numInputRows"))
                per_shard = rows / len(shards)
                found.append({
                    "shards": list(shards), "calls_per_row": 2 * count, "rows": rows,
                    "addBatch_ms": batch["durationMs"]["addBatch"],
                    "in_processor_ms": {str(k): round(v) for k, v in inside.items()},
                    "us_per_call": {str(k): round(v * 1000 / per_shard / (2 * count), 1)
                                    for k, v in inside.items()} if count else None,
                })
    return found


# ---------------------------------------------------------------- output


def summary_lines(result: dict[str, Any]) -> list[str]:
    lines = [f"{NAME}: 10 rules"]
    for run in result["engine"]:
        state = run["state"]
        per = state["per_window"]
        lines.append(
            f"  engine, event time {run['event_rate']:g} tx/s, bucket {run['bucket_ms']} ms: "
            f"{run['tx_per_s']:,} tx/s ({run.get('tx_per_s_cpu', 0):,} per CPU second), "
            f"{run['alerts']:,}"
            f" alerts; {state['windows']:,} windows, {state['window_bytes'] / 1e6:.1f} MB, "
            f"{per.get('bytes_mean')} B and {per.get('entries_mean')} entries per window "
            f"(max {per.get('entries', {}).get('max')})")
    for run in result["jobs"]:
        bd = run["breakdown"]
        path = run.get("state", "spark")
        head = (
            f"  job ({path} state) bucket {run['bucket']}, shards {run['shards']}: "
            f"{run['rows_read']:,} rows in"
            f" {run['wall_s']} s = {run['tx_per_s_end_to_end']:,} tx/s end to end "
            f"({run['tx_per_s_after_first_batch']:,} after the first batch), {run['alerts']:,} "
            f"alerts (engine alone: {run['engine_alerts_same_traffic']:,}); addBatch p50 "
            f"{bd['addBatch']['p50']:.0f} ms of trigger "
            f"{bd['triggerExecution']['p50']:.0f} ms; ")
        stored = run["stored_state"]
        if path == "driver":
            shards = stored.get("shards", {}).values()
            window_bytes = sum(s.get("window_bytes", 0) for s in shards)
            entries = sum(s.get("entries", 0) for s in shards)
            windows = stored.get("windows", 0)
            snapshots = sum(s.get("snapshot_bytes_if_taken", 0) for s in shards)
            lines.append(
                head + f"state at end {windows:,} windows in {len(shards)} shard(s), "
                f"{window_bytes / 1e6:.1f} MB pickled, "
                f"{window_bytes / max(windows, 1):.1f} B and {entries / max(windows, 1):.2f} "
                f"entries per window, "
                f"{sum(s.get('seen_ids', 0) for s in shards):,} seen ids (every shard keeps "
                f"them); snapshots {snapshots / 1e6:.1f} MB; state files "
                f"{sum(s['files']['bytes_on_disk'] for s in shards) / 1e6:.1f} MB on disk")
        else:
            shards = {k: {n: v for n, v in s.items() if n != "engine"}
                      for k, s in stored.get("shards", {}).items()}
            lines.append(
                head + f"state at end {bd.get('state_at_end', {}).get('numRowsTotal')} rows, "
                f"{stored.get('windows', 0):,} windows, {stored.get('stored_bytes', 0) / 1e6:.1f}"
                f" MB stored ({stored.get('stored_bytes_per_window')} B per window); shards "
                f"{shards}{stored.get('error', '')}")
    for probe in result.get("state_calls", []):
        lines.append(
            f"  state probe, shard keys {probe['shards']}, {probe['calls_per_row']} state calls"
            f" per row: addBatch {probe['addBatch_ms']} ms for {probe['rows']:,} rows, in the "
            f"processor {probe['in_processor_ms']} ms, us per call {probe['us_per_call']}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    machine = machine_info()
    start_ms = (int(time.time() * 1000) // 60_000 - 24 * 60) * 60_000  # a day ago, whole min
    rates = [float(r) for r in args.event_rates.split(",") if r.strip()]
    engine_runs = []
    for rate in rates:
        profile = traffic(args.transactions, rate, start_ms)
        for bucket in ("0", args.bucket):
            print(f"engine, {rate:g} tx/s of event time, bucket {bucket}: "
                  f"{len(profile):,} transactions", flush=True)
            engine_runs.append({"event_rate": rate,
                                **run_engine(profile, parse_duration_ms(bucket), args.limit)})
    jobs = []
    configs = [c.split(":") for c in args.configs.split(",") if c.strip()]
    calls: list[dict[str, Any]] = []
    if configs or args.state_calls:
        import tempfile
        from pathlib import Path

        from bench.common import Sandbox
        from spark_jobs.streaming.spark_session import build_session

        job_traffic = traffic(args.spark_transactions, rates[0], start_ms)
        with tempfile.TemporaryDirectory(prefix=f"tideline-bench-{NAME}-") as folder:
            master = {"spark": {"master": args.master}} if args.master else {}
            session = bench_settings(Sandbox("127.0.0.1:9", Path(folder)), master)
            spark = build_session(session, app_name=f"tideline-bench-{NAME}")
            try:
                if args.state_calls:
                    print("state call cost", flush=True)
                    calls = state_call_cost(spark)
                for bucket, shards in configs:
                    run = run_job(spark, args, bucket, int(shards), job_traffic)
                    # the same transactions through the engine alone: the alerts must match
                    alone = run_engine(job_traffic, parse_duration_ms(bucket), args.limit)
                    run["engine_alerts_same_traffic"] = alone["alerts"]
                    jobs.append(run)
            finally:
                spark.stop()
    result = {
        "benchmark": NAME,
        "machine": machine,
        "params": {"transactions": args.transactions,
                   "spark_transactions": args.spark_transactions,
                   "event_rates": rates, "bucket": args.bucket, "limit": args.limit,
                   "state": args.state, "master": args.master or "local[2]",
                   "partitions": args.partitions, "lateness": LATENESS,
                   "rules": benchmark_rules(), "spec": TransactionSpec().__dict__},
        "engine": engine_runs,
        "jobs": jobs,
        "state_calls": calls,
    }
    publish_result(NAME, args.out, result, summary_lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
