"""Shared plumbing of the benchmarks: an isolated broker and lake, job start/stop, progress
arithmetic and result files.

Benchmarks run beside other work on the same machine, so each one starts its own broker on a
free port and writes into a fresh temporary lake: nothing it does can collide with the demo
(port 19092, ./lake) or with a test run.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from spark_jobs.contracts.topics import (
    TOPIC_ACTIVATIONS,
    TOPIC_EVENTS,
    TOPIC_FILTERED_ACTIVATIONS,
    TOPIC_FILTERED_EVENTS,
)
from spark_jobs.settings import KafkaSettings, Settings, deep_merge, load_settings

RESULTS_DIR = Path(__file__).resolve().parent / "results"
FILTERS = ("filter_events", "filter_activations")
METRICS = "experiment_metrics"
JOBS = (*FILTERS, METRICS)
JOB_INPUTS = {
    "filter_events": (TOPIC_EVENTS,),
    "filter_activations": (TOPIC_ACTIVATIONS,),
    METRICS: (TOPIC_FILTERED_EVENTS, TOPIC_FILTERED_ACTIVATIONS),
}
POLL_S = 0.25
REPORT_EVERY_S = 30.0
STALL_S = 300.0  # far longer than any batch seen on 2 cores, first batches included
Progress = dict[str, Any]


# ---------------------------------------------------------------- environment


@dataclass(frozen=True)
class Sandbox:
    """Where one benchmark run lives: its broker's address and its temporary folder."""

    bootstrap: str
    root: Path


@contextmanager
def sandbox(name: str) -> Iterator[Sandbox]:
    """A broker on a free port and a temporary folder; both are gone when the block ends."""
    from spark_jobs.local.broker import EmbeddedBroker

    with (
        tempfile.TemporaryDirectory(prefix=f"tideline-bench-{name}-") as folder,
        EmbeddedBroker(port=0) as broker,
    ):
        yield Sandbox(broker.bootstrap, Path(folder))


def bench_settings(box: Sandbox, overrides: Mapping[str, Any]) -> Settings:
    """Settings from defaults only (no $TIDELINE_* leaks in), pointed at the sandbox."""
    base = {
        "kafka": {"bootstrap": box.bootstrap},
        "lake": {"root": str(box.root / "lake")},
        # keep every batch's progress (the default keeps the last 100)
        "spark": {"master": "local[2]",
                  "conf": {"spark.sql.streaming.numRecentProgressUpdates": "100000"}},
    }
    return load_settings(environ={}, overrides=deep_merge(base, overrides))


@dataclass
class RunningJobs:
    """The streaming queries of one session and their sinks (which own Kafka producers)."""

    queries: dict[str, Any]
    sinks: dict[str, Any]

    def check(self) -> None:
        """Raise as soon as one query has failed, instead of waiting for a timeout."""
        for name, query in self.queries.items():
            if query.exception() is not None:
                raise RuntimeError(f"{name} failed: {query.exception()}")

    def stop(self, finish_s: float = 30.0) -> None:
        """Let running batches finish (as the demo does: interrupting one mid-way makes
        Spark print long stack traces), then stop every query and close its producer."""
        waiters = [
            threading.Thread(target=_finish_batches, args=(query,), daemon=True)
            for query in self.queries.values()
        ]
        deadline = time.monotonic() + finish_s
        for waiter in waiters:
            waiter.start()
        for waiter in waiters:
            waiter.join(max(0.0, deadline - time.monotonic()))
        for name, query in self.queries.items():
            query.stop()
            sink = self.sinks[name]
            close = getattr(sink, "close", None)
            if close is not None:
                close()
            _close_producer(sink)


def _finish_batches(query: Any) -> None:
    """processAllAvailable, silent when the query already failed (check() reports that)."""
    with contextlib.suppress(Exception):
        query.processAllAvailable()


def _close_producer(sink: Any) -> None:
    """BatchOutputs.close() flushes but keeps its producer, which then reconnects (and logs)
    every second once the benchmark's broker is gone; close it for good."""
    producer = getattr(getattr(sink, "outputs", None), "_producer", None)
    if producer is not None:
        producer.close()


def start_jobs(spark: Any, settings: Settings, names: Sequence[str] = JOBS) -> RunningJobs:
    """Start the jobs as concurrent queries of one session, as the demo does."""
    from spark_jobs.streaming.runner import start_job

    jobs = RunningJobs({}, {})
    for name in names:
        query, sink = start_job(spark, settings, name)
        jobs.queries[name] = query
        jobs.sinks[name] = sink
    return jobs


# ---------------------------------------------------------------- offsets and progress


def offset_targets(kafka: KafkaSettings, topics: Sequence[str]) -> dict[str, int]:
    """End offsets keyed like the source's offsets: `p` for one topic, `topic/p` for several."""
    from spark_jobs.streaming.kafka.topic_admin import end_offsets

    targets: dict[str, int] = {}
    for topic in topics:
        for partition, end in end_offsets(kafka, topic).items():
            key = str(partition) if len(topics) == 1 else f"{topic}/{partition}"
            targets[key] = end
    return targets


def progress_list(query: Any) -> list[Progress]:
    """Every retained progress of a query as plain dicts (PySpark returns objects)."""
    return [_as_dict(p) for p in query.recentProgress]


def last_progress(query: Any) -> Progress | None:
    progress = query.lastProgress
    return None if progress is None else _as_dict(progress)


def _as_dict(progress: Any) -> Progress:
    text = getattr(progress, "json", None)
    return json.loads(text) if isinstance(text, str) else dict(progress)


def end_offsets_of(progress: Progress) -> dict[str, int]:
    """The offsets the batch read up to, over all its sources (JSON text or dict)."""
    merged: dict[str, int] = {}
    for source in progress.get("sources", []):
        end = source.get("endOffset")
        if isinstance(end, str):
            end = json.loads(end)
        if isinstance(end, dict):
            merged.update({str(k): int(v) for k, v in end.items()})
    return merged


def covers(progress: Progress, targets: Mapping[str, int]) -> bool:
    """True when the batch's end offsets reach every target offset."""
    ends = end_offsets_of(progress)
    return all(ends.get(key, -1) >= end for key, end in targets.items())


def executed_batches(progresses: Iterable[Progress]) -> list[Progress]:
    """Progress of batches that ran (idle reports have no addBatch), one per batch id."""
    by_id = {p["batchId"]: p for p in progresses if "addBatch" in p.get("durationMs", {})}
    return [by_id[k] for k in sorted(by_id)]


class StalledError(RuntimeError):
    """No job read anything for a long time although input was left: waiting is pointless."""


def wait_until_drained(
    jobs: RunningJobs, settings: Settings, timeout_s: float, names: Sequence[str] = JOBS,
    stall_s: float = STALL_S,
) -> dict[str, Progress]:
    """The first batch of each named job that read its whole input. The filters' input is
    what the input topics hold now (nothing may be producing); the metrics job's input is
    what the filters had written once both were done. StalledError when no job has read
    anything for stall_s: a held-back query would otherwise keep us waiting until timeout."""
    targets = {name: offset_targets(settings.kafka, JOB_INPUTS[name]) for name in FILTERS}
    done: dict[str, Progress] = {}
    deadline = time.monotonic() + timeout_s
    next_report = time.monotonic() + REPORT_EVERY_S
    read, moved = offsets_read(jobs), time.monotonic()
    while not all(name in done for name in names):
        jobs.check()
        now = time.monotonic()
        if now > deadline:
            raise TimeoutError(f"not drained after {timeout_s:.0f} s; {status_line(jobs)}")
        now_read = offsets_read(jobs)
        if now_read != read:
            read, moved = now_read, now
        elif now - moved > stall_s:
            raise StalledError(f"no job read anything for {stall_s:.0f} s with input left; "
                               f"{status_line(jobs)}")
        if now > next_report:
            print(f"  waiting: {status_line(jobs)}", file=sys.stderr, flush=True)
            next_report += REPORT_EVERY_S
        if METRICS in names and METRICS not in targets and all(n in done for n in FILTERS):
            targets[METRICS] = offset_targets(settings.kafka, JOB_INPUTS[METRICS])
        for name, target in targets.items():
            last = last_progress(jobs.queries[name])
            if name not in done and last is not None and covers(last, target):
                found = first_covering(progress_list(jobs.queries[name]), target)
                if found is not None:
                    done[name] = found
        time.sleep(POLL_S)
    return done


def offsets_read(jobs: RunningJobs) -> dict[str, int]:
    """Per job, the sum of the offsets its last batch read up to (0 before any batch)."""
    read = {}
    for name, query in jobs.queries.items():
        last = last_progress(query)
        read[name] = sum(end_offsets_of(last).values()) if last else 0
    return read


def status_line(jobs: RunningJobs) -> str:
    """Each job's last batch and the offsets it has read, for a long wait."""
    read = offsets_read(jobs)
    return "; ".join(
        f"{name} batch {(last_progress(query) or {}).get('batchId', '-')} "
        f"at offset sum {read[name]:,}"
        for name, query in jobs.queries.items()
    )


def first_covering(progresses: Iterable[Progress], targets: Mapping[str, int]) -> Progress | None:
    """The earliest executed batch that had read up to the targets."""
    return next((p for p in executed_batches(progresses) if covers(p, targets)), None)


def iso_ms(text: str) -> int:
    """Epoch ms of a timestamp in Spark's progress format (2026-01-01T00:00:00.000Z)."""
    return round(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def batch_end_s(progress: Progress) -> float:
    """Epoch seconds when the batch finished: its start timestamp plus its duration."""
    return (iso_ms(progress["timestamp"]) + progress["durationMs"]["triggerExecution"]) / 1000


def percentiles(values: Sequence[float], qs: Sequence[int] = (50, 95)) -> dict[str, float]:
    """{'p50': ..., ...}; empty input gives NaN-free zeros so the JSON stays plain."""
    if len(values) == 0:
        return {f"p{q}": 0.0 for q in qs}
    found = np.percentile(np.asarray(values, dtype=float), qs)
    return {f"p{q}": round(float(v), 1) for q, v in zip(qs, found, strict=True)}


# ---------------------------------------------------------------- results


def result_path(name: str, out: str | None) -> Path:
    """--out, or bench/results/<name>-<UTC date>.json; the folder is created."""
    path = Path(out) if out else RESULTS_DIR / f"{name}-{datetime.now(UTC):%Y-%m-%d}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def machine_info() -> dict[str, Any]:
    """What a number depends on: cores, memory, versions, and how busy the machine was."""
    import pyspark

    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return {
        "cores": os.cpu_count(),
        "memory_gb": round(pages / 2**30, 1),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "pyspark": pyspark.__version__,
        "load_average_at_start": load_average(),
        "utc": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def load_average() -> list[float]:
    """1, 5 and 15 minute load: other work on the machine moves these numbers a lot."""
    return [round(x, 2) for x in os.getloadavg()]


def write_result(path: Path, payload: Mapping[str, Any]) -> None:
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n")


class Stopwatch:
    """Seconds since creation, on the monotonic clock."""

    def __init__(self) -> None:
        self.started = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.started


def publish_result(
    name: str, out: str | None, result: dict[str, Any],
    summary: Callable[[dict[str, Any]], list[str]],
) -> None:
    """Stamp the end load average, write the JSON result and print the human summary."""
    result["machine"]["load_average_at_end"] = load_average()
    path = result_path(name, out)
    write_result(path, result)
    print("\n".join(summary(result)))
    print(f"result: {path}")
