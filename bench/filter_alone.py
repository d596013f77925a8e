"""One experiment filter job alone on the pipeline benchmark's input (issue 15).

`bench.pipeline_throughput` runs the three experiment jobs together on two cores, so a job's
figure there says as much about the cores it shares as about the job. This runs one filter
job alone on the same pre-loaded input (same generator, seed and limit) and reports what the
shared run hides: its rows/s alone, its first batch against its steady batches, and how long
its sink spends reading dead letters' bytes back from Kafka (streaming/kafka/evidence.py).

    .venv/bin/python -m bench.filter_alone [--job filter_events] [--messages N] [--limit L]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

from bench.common import (
    FILTERS,
    JOB_INPUTS,
    POLL_S,
    Stopwatch,
    bench_settings,
    covers,
    executed_batches,
    last_progress,
    machine_info,
    offset_targets,
    progress_list,
    publish_result,
    sandbox,
    start_jobs,
)
from bench.pipeline_throughput import EXPERIMENTS, preload, workload_spec

NAME = "filter_alone"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"bench.{NAME}", description=__doc__.split("\n")[0])
    parser.add_argument("--job", default="filter_events", choices=FILTERS)
    parser.add_argument("--messages", type=int, default=600_000,
                        help="about this many input messages, as bench.pipeline_throughput")
    parser.add_argument("--limit", type=int, default=100_000,
                        help="jobs.max_records_per_trigger (default 100000)")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--out", default=None, help="result JSON (default bench/results/...)")
    return parser.parse_args(argv)


class TimedReadBack:
    """The sink's dead-letter read-back, timed per call (wraps the sink's own method)."""

    def __init__(self, read_back: Any) -> None:
        self.read_back = read_back
        self.calls: list[dict[str, float]] = []

    def __call__(self, places: list[Any]) -> Any:
        started = time.perf_counter()
        found = self.read_back(places)
        self.calls.append({"records": len(places),
                           "seconds": round(time.perf_counter() - started, 3)})
        return found


def run_alone(settings: Any, job: str, timeout_s: float) -> dict[str, Any]:
    """Start the session (not timed), then the job (timed) until it has read its input."""
    from spark_jobs.streaming.spark_session import build_session

    clock = Stopwatch()
    spark = build_session(settings, app_name=f"tideline-bench-{NAME}")
    session_start_s = clock.elapsed()
    try:
        target = offset_targets(settings.kafka, JOB_INPUTS[job])
        clock = Stopwatch()
        jobs = start_jobs(spark, settings, [job])
        timed = TimedReadBack(jobs.sinks[job].outputs.read_back)
        jobs.sinks[job].outputs.read_back = timed
        try:
            while not covers(last_progress(jobs.queries[job]) or {}, target):
                jobs.check()
                if clock.elapsed() > timeout_s:
                    raise TimeoutError(f"{job} has not read its input after {timeout_s:.0f} s")
                time.sleep(POLL_S)
            wall_s = clock.elapsed()
            batches = executed_batches(progress_list(jobs.queries[job]))
        finally:
            jobs.stop()
    finally:
        spark.stop()
    return {"session_start_s": round(session_start_s, 2), "wall_s": round(wall_s, 2),
            "batches": [batch_row(p) for p in batches], "read_back": timed.calls}


def batch_row(progress: dict[str, Any]) -> dict[str, Any]:
    durations = progress["durationMs"]
    return {"batch": progress["batchId"], "rows": progress["numInputRows"],
            **{name: durations.get(name) for name in
               ("triggerExecution", "latestOffset", "queryPlanning", "addBatch")}}


def report(run: dict[str, Any]) -> dict[str, Any]:
    """Rows/s alone, the first batch against the steady ones, the read-back's share."""
    batches = [b for b in run["batches"] if b["rows"]]
    rows = sum(b["rows"] for b in batches)
    first, steady = batches[0], batches[1:]
    steady_s = sum(b["triggerExecution"] for b in steady) / 1000
    read_back_s = sum(call["seconds"] for call in run["read_back"])
    return {
        "rows": rows,
        "rows_per_s_end_to_end": round(rows / run["wall_s"]),
        "first_batch": {"rows": first["rows"], "seconds": first["triggerExecution"] / 1000},
        "steady_rows_per_s": round(sum(b["rows"] for b in steady) / steady_s) if steady_s else None,
        "steady_batch_s": sorted(b["triggerExecution"] / 1000 for b in steady),
        "read_back_s": round(read_back_s, 2),
        "read_back_share_of_wall": round(read_back_s / run["wall_s"], 3),
        "dead_letters_read_back": sum(call["records"] for call in run["read_back"]),
    }


def summary(result: dict[str, Any]) -> list[str]:
    r, params = result["report"], result["params"]
    return [
        f"{NAME}: {params['job']} alone, {r['rows']:,} rows in {result['run']['wall_s']} s = "
        f"{r['rows_per_s_end_to_end']:,} rows/s end to end (session start not counted)",
        f"  first batch: {r['first_batch']['rows']:,} rows in {r['first_batch']['seconds']:.1f} s;"
        f" steady batches {r['steady_rows_per_s']:,} rows/s "
        f"({', '.join(f'{s:.1f}' for s in r['steady_batch_s'])} s)",
        f"  dead letters read back: {r['dead_letters_read_back']:,} records in "
        f"{r['read_back_s']} s ({r['read_back_share_of_wall']:.0%} of the wall)",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    machine = machine_info()
    overrides = {"experiments": EXPERIMENTS,
                 "jobs": {"trigger": "0", "max_records_per_trigger": args.limit}}
    with sandbox(NAME) as box:
        settings = bench_settings(box, overrides)
        spec = workload_spec(settings, args.messages, None)
        workload = preload(spec, settings)
        run = run_alone(settings, args.job, args.timeout)
    result = {"benchmark": NAME, "machine": machine,
              "params": {"job": args.job, "messages": args.messages, "limit": args.limit},
              "workload": workload, "run": run, "report": report(run)}
    publish_result(NAME, args.out, result, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
