"""Freshness: time from a record's arrival in Kafka to its window's row in experiment_metrics.

The generator runs live, paced so that event time advances at wall-clock speed, while the
three jobs run as queries of one SparkSession with a short trigger, as in the demo (window
1 min, lateness 20 s). Afterwards every event in raw_events whose window has a row in
experiment_metrics gets freshness = the earliest updated_at of that window's rows minus the
event's Kafka timestamp.

A window is final only once the watermark (max event time - lateness) passes its end, so
an event at ts cannot be counted before event time reaches window_end(ts) + lateness: the
floor is between lateness and window + lateness (20-80 s here). The report gives that floor
and the pipeline's own overhead above it.

    .venv/bin/python -m bench.freshness [--minutes M] [--rate R]
"""

from __future__ import annotations

import argparse
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from bench.common import (
    FILTERS,
    JOB_INPUTS,
    JOBS,
    METRICS,
    POLL_S,
    Progress,
    RunningJobs,
    Stopwatch,
    bench_settings,
    end_offsets_of,
    executed_batches,
    iso_ms,
    last_progress,
    machine_info,
    offset_targets,
    offsets_read,
    percentiles,
    progress_list,
    publish_result,
    sandbox,
    start_jobs,
    wait_until_drained,
)
from spark_jobs.contracts.tables import (
    TABLE_EXPERIMENT_METRICS,
    TABLE_RAW_ACTIVATIONS,
    TABLE_RAW_EVENTS,
)
from spark_jobs.experiments.traffic import GenerationReport, TrafficSpec, generate
from spark_jobs.settings import Settings

NAME = "freshness"
EXPERIMENTS = {
    "period": "30m", "window": "1m", "lateness": "20s", "dedup_ttl": "20s",
    "cap_per_user_hour": 300,
}
# The validation cases ramp up 0.10-0.35 of a period after the spec's start; the ramps are
# loaded this much earlier so that every group has an open period from the first record.
RAMP_LEAD_IN = 0.35
QS = (50, 90, 99)
EPOCH = pd.Timestamp(0, tz="UTC")
STEADY_STATUS = ("Waiting for data to arrive", "Waiting for next trigger")
SETTLE_S = 5.0  # at least; else ten triggers without anything new to read


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench.freshness", description="Kafka arrival to final window row, live."
    )
    parser.add_argument("--minutes", type=float, default=5.0,
                        help="how long the generator runs (default 5)")
    parser.add_argument("--rate", type=float, default=None,
                        help="messages/s (default: the rate at which event time keeps pace "
                             "with the wall clock)")
    parser.add_argument("--users", type=int, default=2000, help="generated users (default 2000)")
    parser.add_argument("--trigger", default="500ms", help="trigger of every job (default 500ms)")
    parser.add_argument("--drain", type=float, default=120.0,
                        help="max seconds to let the jobs finish after the generator stops")
    parser.add_argument("--out", default=None, help="result JSON (default bench/results/...)")
    return parser.parse_args(argv)


# ---------------------------------------------------------------- traffic


def live_spec(settings: Settings, users: int) -> TrafficSpec:
    """Demo-like traffic whose event time starts now, aligned to the window."""
    window = settings.experiments.window_ms
    now = int(time.time() * 1000)
    return TrafficSpec.from_settings(
        settings.experiments, start_ms=now - now % window, n_users=users
    )


def real_time_rate(spec: TrafficSpec) -> float:
    """Messages per second of one cycle spread over the cycle's event-time duration."""
    return sum(1 for _ in generate(spec)) / (spec.duration_ms / 1000)


def load_ramps(settings: Settings, spec: TrafficSpec, minutes: float) -> int:
    """Ramps for every cycle the run can reach, shifted RAMP_LEAD_IN periods earlier, and a
    snapshot holding them all (as the demo does); returns the number of rows."""
    from spark_jobs.experiments.admin.metadata import add_ramps
    from spark_jobs.experiments.admin.snapshot import publish_snapshot
    from spark_jobs.experiments.core.periods import RampRow

    window = spec.window_ms
    lead_in = math.ceil(RAMP_LEAD_IN * spec.period_ms / window) * window
    cycles = math.ceil((minutes * 60_000 + lead_in) / spec.duration_ms) + 1
    shifted = replace(spec, start_ms=spec.start_ms - lead_in)
    rows = [RampRow(**row) for row in shifted.ramp_rows(cycles=cycles)]
    add_ramps(settings.metadata.url, rows)
    publish_snapshot(settings, int(time.time() * 1000) + 10 * 86_400_000, None)
    return len(rows)


class LiveGenerator:
    """produce(loop=True) in a thread until stopped; keeps its report or its error."""

    def __init__(self, spec: TrafficSpec, settings: Settings, rate: float) -> None:
        self.stop_event = threading.Event()
        self.report: GenerationReport | None = None
        self.error: BaseException | None = None
        self.started_at = 0.0
        self._thread = threading.Thread(
            target=self._run, args=(spec, settings, rate), name="generator", daemon=True
        )

    def _run(self, spec: TrafficSpec, settings: Settings, rate: float) -> None:
        from spark_jobs.experiments.traffic import produce

        try:
            self.report = produce(spec, settings, rate, progress=False, loop=True,
                                  stop_event=self.stop_event)
        except BaseException as exc:  # reported by stop(), never lost in the thread
            self.error = exc

    def start(self) -> None:
        self.started_at = time.time()
        self._thread.start()

    def stop(self) -> GenerationReport:
        self.stop_event.set()
        self._thread.join(180)
        if self.error is not None:
            raise RuntimeError(f"generator failed: {self.error}") from self.error
        if self.report is None:
            raise RuntimeError("generator did not finish within 180 s of the stop")
        return self.report


# ---------------------------------------------------------------- the live run


def wait_until_steady(jobs: RunningJobs, timeout_s: float = 300.0) -> None:
    """Until every query has initialised its sources and is waiting for data, so that the
    generator's first records do not pay for query start-up."""
    deadline = time.monotonic() + timeout_s
    while not all(q.status["message"] in STEADY_STATUS for q in jobs.queries.values()):
        jobs.check()
        if time.monotonic() > deadline:
            raise TimeoutError(f"queries not ready after {timeout_s:.0f} s")
        time.sleep(POLL_S)


def wait_until_settled(
    jobs: RunningJobs, lateness_ms: int, settle_s: float, timeout_s: float
) -> bool:
    """Until the metrics job has read nothing new for settle_s and its last batch ran with
    the final watermark of what it read, so every window that watermark passes is in Delta.

    It need not read the filtered topics to the end: aligned on event time, it holds the
    events after the last activation back until another one arrives or jobs.idle_timeout
    passes, and that tail cannot close a window of the run anyway. False on timeout."""
    deadline = time.monotonic() + timeout_s
    read, moved = offsets_read(jobs)[METRICS], time.monotonic()
    while time.monotonic() < deadline:
        jobs.check()
        now_read = offsets_read(jobs)[METRICS]
        if now_read != read:
            read, moved = now_read, time.monotonic()
        settled = time.monotonic() - moved >= settle_s
        if settled and ran_with_final_watermark(progress_list(jobs.queries[METRICS]), lateness_ms):
            return True
        time.sleep(POLL_S)
    return False


def ran_with_final_watermark(progresses: Sequence[Progress], lateness_ms: int) -> bool:
    batches = executed_batches(progresses)
    maxima = [iso_ms(p["eventTime"]["max"]) for p in batches if "max" in p["eventTime"]]
    used = batches[-1]["eventTime"].get("watermark") if batches else None
    return bool(maxima) and used is not None and iso_ms(used) >= max(maxima) - lateness_ms


def run_live(
    settings: Settings, spec: TrafficSpec, rate: float, minutes: float, drain_s: float
) -> dict[str, Any]:
    """Jobs up first, then the generator for `minutes`, then let the jobs drain."""
    from spark_jobs.streaming.spark_session import build_session

    clock = Stopwatch()
    spark = build_session(settings, app_name="tideline-bench-freshness")
    jobs: RunningJobs | None = None
    try:
        jobs = start_jobs(spark, settings, JOBS)
        wait_until_steady(jobs)
        ready_s = clock.elapsed()
        generator = LiveGenerator(spec, settings, rate)
        generator.start()
        _sleep_watching(jobs, minutes * 60)
        report = generator.stop()
        drain = Stopwatch()
        wait_until_drained(jobs, settings, drain_s, names=FILTERS)
        settled = wait_until_settled(
            jobs, settings.experiments.lateness_ms,
            max(SETTLE_S, 10 * settings.jobs.trigger_ms / 1000),
            max(5.0, drain_s - drain.elapsed()),
        )
        unread = unread_by_metrics(jobs, settings)
        return {
            "spark_ready_s": round(ready_s, 1),
            "generator_started_at": generator.started_at,
            "messages": report.total(),
            "by_topic": report.counts,
            "achieved_rate": round(report.rate, 1),
            "drain_s": round(drain.elapsed(), 1),
            "metrics_settled": settled,
            "metrics_unread_at_end": unread,
            "batches": {n: len(executed_batches(progress_list(q)))
                        for n, q in jobs.queries.items()},
        }
    finally:
        if jobs is not None:
            jobs.stop()
        spark.stop()


def unread_by_metrics(jobs: RunningJobs, settings: Settings) -> int:
    """Filtered records the metrics job had not read when the run ended (held back)."""
    last = last_progress(jobs.queries[METRICS])
    read = end_offsets_of(last) if last else {}
    targets = offset_targets(settings.kafka, JOB_INPUTS[METRICS])
    return sum(max(0, end - read.get(key, 0)) for key, end in targets.items())


def _sleep_watching(jobs: RunningJobs, seconds: float) -> None:
    """Sleep, but fail fast when a job dies."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        jobs.check()
        time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))


# ---------------------------------------------------------------- freshness


def window_first_rows(settings: Settings) -> pd.Series:
    """Per window_end: epoch ms of the earliest updated_at among its rows (its final row)."""
    from spark_jobs.streaming.lake.delta import read_arrow, table_exists

    uri = settings.lake.table(TABLE_EXPERIMENT_METRICS)
    if not table_exists(uri):  # no window closed during the run
        return pd.Series(dtype="int64")
    table = read_arrow(uri, columns=["window_end", "updated_at"]).to_pandas()
    updated_ms = (table["updated_at"] - EPOCH) // pd.Timedelta(milliseconds=1)  # any unit
    return updated_ms.groupby(table["window_end"]).min()


def commit_times_ms(settings: Settings) -> np.ndarray:
    """Commit timestamps of the metrics table's data commits, ascending: when a row whose
    updated_at was stamped just before its MERGE became visible to readers."""
    from spark_jobs.streaming.lake.delta import load_table

    table = load_table(settings.lake.table(TABLE_EXPERIMENT_METRICS))
    history = [] if table is None else table.history()
    times = [c["timestamp"] for c in history if c.get("operation") in ("MERGE", "WRITE")]
    return np.sort(np.asarray(times, dtype=np.int64))


def arrivals(settings: Settings) -> tuple[np.ndarray, np.ndarray]:
    """(ts, kafka_timestamp) of every accepted record, by ts: the records that move the
    metrics job's watermark, with when each arrived."""
    from spark_jobs.streaming.lake.delta import read_arrow

    columns = ["ts", "kafka_timestamp"]
    both = pd.concat([
        read_arrow(settings.lake.table(name), columns=columns).to_pandas()
        for name in (TABLE_RAW_EVENTS, TABLE_RAW_ACTIVATIONS)
    ]).sort_values("ts")
    return both["ts"].to_numpy(), both["kafka_timestamp"].to_numpy()


def closable_at(ts: np.ndarray, kafka_ms: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """Per threshold, the wall time (ms) the first record with ts >= threshold arrived: when
    event time reached it, so when an instant pipeline could have closed the window."""
    earliest_after = np.minimum.accumulate(kafka_ms[::-1])[::-1]  # min over the suffix
    index = np.searchsorted(ts, thresholds, side="left")
    found = index < len(ts)
    return np.where(found, earliest_after[np.minimum(index, len(ts) - 1)], np.nan)


def freshness(settings: Settings) -> dict[str, Any]:
    """Percentiles (ms) of freshness, split into the wait imposed by event time (until a
    record with ts >= window end + lateness arrived) and the pipeline's overhead after it;
    also the event-time floor and the freshness to the commit that made the row visible."""
    from spark_jobs.streaming.lake.delta import read_arrow

    events = read_arrow(settings.lake.table(TABLE_RAW_EVENTS),
                        columns=["ts", "kafka_timestamp"]).to_pandas()
    window, lateness = settings.experiments.window_ms, settings.experiments.lateness_ms
    window_end = (events["ts"] // window + 1) * window
    first_row = window_end.map(window_first_rows(settings))
    counted = first_row.notna()
    kafka_ms = events["kafka_timestamp"][counted]
    fresh = (first_row[counted] - kafka_ms).to_numpy()
    closable = closable_at(*arrivals(settings), (window_end[counted] + lateness).to_numpy())
    visible = visible_after_commit(commit_times_ms(settings), first_row[counted], kafka_ms)
    per_window = pd.DataFrame({"window_end": window_end[counted], "fresh": fresh,
                               "overhead": first_row[counted].to_numpy() - closable})
    return {
        "events": len(events),
        "counted": int(counted.sum()),
        "windows": int(window_end[counted].nunique()),
        "freshness_ms": {**percentiles(fresh, QS), "max": _max(fresh)},
        "event_time_floor_ms": percentiles(
            (window_end + lateness - events["ts"])[counted].to_numpy(), QS
        ),
        "wait_for_watermark_ms": percentiles(closable - kafka_ms.to_numpy(), QS),
        "pipeline_overhead_ms": percentiles(per_window["overhead"].to_numpy(), QS),
        "visible_ms": percentiles(visible, QS),
        "per_window": [
            {"window_end": int(w), "events": len(g), **percentiles(g["fresh"], (50, 99)),
             "overhead_ms": round(float(g["overhead"].iloc[0]))}
            for w, g in per_window.groupby("window_end")
        ],
    }


def visible_after_commit(
    commits: np.ndarray, first_row_ms: pd.Series, kafka_ms: pd.Series
) -> np.ndarray:
    """Freshness to the first data commit at or after the row's updated_at stamp."""
    index = np.searchsorted(commits, first_row_ms.to_numpy(), side="left")
    found = index < len(commits)
    return commits[index[found]] - kafka_ms.to_numpy()[found]


def _max(values: np.ndarray) -> float:
    return float(values.max()) if len(values) else 0.0


# ---------------------------------------------------------------- output


def summary_lines(result: dict[str, Any]) -> list[str]:
    run, found = result["run"], result["freshness"]
    fresh = found["freshness_ms"]

    def p50_p99(key: str) -> str:
        return f"p50 {found[key]['p50'] / 1000:.1f} s, p99 {found[key]['p99'] / 1000:.1f} s"

    return [
        f"{NAME}: {run['messages']:,} messages at {run['achieved_rate']:.0f} msg/s over "
        f"{result['params']['minutes']:g} min (event time at wall-clock speed; "
        f"window {EXPERIMENTS['window']}, lateness {EXPERIMENTS['lateness']}, trigger "
        f"{result['params']['trigger']})",
        f"  Kafka arrival -> final window row, {found['counted']:,} of {found['events']:,} "
        f"accepted events in {found['windows']} closed windows: "
        + ", ".join(f"{k} {v / 1000:.1f} s" for k, v in fresh.items()),
        f"  of which waiting for event time to pass window end + lateness: "
        f"{p50_p99('wait_for_watermark_ms')}; pipeline after that: "
        f"{p50_p99('pipeline_overhead_ms')}",
        "  A window is final only once the watermark (max event time - lateness) passes its end,",
        "  so freshness is bounded below by window + lateness in event time (for an event at the",
        f"  window's start; lateness for one at its end; here {p50_p99('event_time_floor_ms')}).",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    machine = machine_info()
    overrides = {"experiments": EXPERIMENTS, "jobs": {"trigger": args.trigger}}
    with sandbox(NAME) as box:
        settings = bench_settings(box, overrides)
        spec = live_spec(settings, args.users)
        rate = args.rate or real_time_rate(spec)
        ramps = load_ramps(settings, spec, args.minutes)
        print(f"{args.users} users at {rate:.1f} msg/s for {args.minutes:g} min; "
              "starting the jobs", flush=True)
        run = run_live(settings, spec, rate, args.minutes, args.drain)
        found = freshness(settings)
    result = {
        "benchmark": NAME,
        "machine": machine,
        "params": {"minutes": args.minutes, "rate": round(rate, 2), "users": args.users,
                   "trigger": args.trigger, "experiments": EXPERIMENTS, "ramp_rows": ramps,
                   "spec_start_ms": spec.start_ms},
        "run": run,
        "freshness": found,
    }
    publish_result(NAME, args.out, result, summary_lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
