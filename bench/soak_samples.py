"""What the platform soak records every interval, and what it concludes from the samples.

A sample holds the exact count of stored record batches of every topic partition
(`kafka_wire.BatchCounter`), each streaming job's progress as it reports it
(`<lake>/_progress/<job>.json`: batch id, offsets read, watermark) with its backlog against
the partitions' real ends, and the broker's RSS and CPU time. The conclusions: batches per
partition per hour, fitted over the steady part of the run, the hours until the busiest
partition holds the degradation point's batch count, and whether every job kept advancing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.kafka_wire import BatchCounter

STEADY_FROM = 0.25  # the rate is fitted over the run after its first quarter (warm-up)


def topic_partitions(bootstrap: str) -> dict[str, list[int]]:
    """Every user topic and its partitions, as the broker lists them now."""
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}).list_topics(
        timeout=30)
    return {name: sorted(t.partitions) for name, t in metadata.topics.items()
            if not name.startswith("__") and t.partitions}


def job_progress(progress_dir: Path, jobs: Sequence[str],
                 ends: dict[tuple[str, int], int]) -> dict[str, Any]:
    """Per job: its latest batch id, how old its last report is, rows it read in that batch,
    its backlog (messages in its input partitions past what it has read) and watermark."""
    now_ms = int(time.time() * 1000)
    found: dict[str, Any] = {}
    for job in jobs:
        try:
            report = json.loads((progress_dir / f"{job}.json").read_text())
            history = (progress_dir / f"{job}.jsonl").read_text().splitlines()
        except (OSError, ValueError):
            found[job] = None
            continue
        last = next((json.loads(line) for line in reversed(history)
                     if '"batchId"' in line), None) if history else None
        found[job] = {
            "status": report.get("status"),
            "report_age_s": round((now_ms - int(report.get("reported_at_ms", now_ms))) / 1000, 1),
            **(_batch_facts(job, last, ends, now_ms) if last else {}),
        }
    return found


def _batch_facts(job: str, progress: dict[str, Any], ends: dict[tuple[str, int], int],
                 now_ms: int) -> dict[str, Any]:
    from spark_jobs.catalog import job as catalog_job
    from spark_jobs.control.monitor.lag import consumed_offsets

    consumed = consumed_offsets(progress, catalog_job(job).inputs) or {}
    backlog = sum(max(0, ends.get(where, 0) - offset) for where, offset in consumed.items())
    watermark = (progress.get("eventTime") or {}).get("watermark")
    watermark_ms = _iso_ms(watermark) if watermark else None
    return {
        "batch_id": progress.get("batchId"),
        "batch_age_s": round((now_ms - int(progress.get("reported_at_ms", now_ms))) / 1000, 1),
        "input_rows": progress.get("numInputRows"),
        "trigger_ms": (progress.get("durationMs") or {}).get("triggerExecution"),
        "backlog_messages": backlog,
        "watermark_behind_clock_s": (round((now_ms - watermark_ms) / 1000, 1)
                                     if watermark_ms and watermark_ms > 0 else None),
    }


def _iso_ms(text: str) -> int:
    from datetime import datetime

    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def broker_usage(pid: int) -> dict[str, float]:
    """The broker's resident memory and CPU seconds so far."""
    import psutil

    process = psutil.Process(pid)
    cpu = process.cpu_times()
    return {"rss_mb": round(process.memory_info().rss / 2**20, 1),
            "cpu_s": round(cpu.user + cpu.system, 1)}


def take_sample(counter: BatchCounter, started_s: float, progress_dir: Path,
                jobs: Sequence[str], broker_pid: int) -> dict[str, Any]:
    """One sample; the batch counter reads only what was written since the previous one."""
    read_started = time.monotonic()
    counter.update(topic_partitions(counter.bootstrap))
    read_s = time.monotonic() - read_started
    ends = dict(counter.next_offset)
    return {
        "elapsed_s": round(time.monotonic() - started_s, 1),
        "utc": time.strftime("%H:%M:%S", time.gmtime()),
        "batches": {f"{t}/{p}": n for (t, p), n in sorted(counter.batches.items())},
        "records": {f"{t}/{p}": n for (t, p), n in sorted(counter.records.items())},
        "count_read_s": round(read_s, 2),
        "jobs": job_progress(progress_dir, jobs, ends),
        "broker": broker_usage(broker_pid),
        "load_average": [round(x, 2) for x in __import__("os").getloadavg()],
    }


def rates_per_hour(samples: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Batches per partition per hour: least-squares slope over the steady part of the run."""
    if len(samples) < 3:
        return {}
    end = samples[-1]["elapsed_s"]
    steady = [s for s in samples if s["elapsed_s"] >= end * STEADY_FROM] or list(samples)
    hours = np.array([s["elapsed_s"] / 3600 for s in steady])
    rates = {}
    for key in samples[-1]["batches"]:
        counts = np.array([s["batches"].get(key, 0) for s in steady], dtype=float)
        slope = float(np.polyfit(hours, counts, 1)[0]) if np.ptp(hours) > 0 else 0.0
        rates[key] = round(max(slope, 0.0), 1)
    return rates


def extrapolate(samples: Sequence[dict[str, Any]], degrade_at: int) -> dict[str, Any]:
    """Hours from the platform's start until each partition holds `degrade_at` batches, at
    its steady rate; the busiest partition decides."""
    rates = rates_per_hour(samples)
    last = samples[-1]
    hours_now = last["elapsed_s"] / 3600
    until = {}
    for key, rate in rates.items():
        left = degrade_at - last["batches"][key]
        until[key] = round(hours_now + left / rate, 1) if rate > 0 else None
    finite = {k: v for k, v in until.items() if v is not None}
    busiest = max(rates, key=lambda k: rates[k]) if rates else None
    first = min(finite, key=lambda k: finite[k]) if finite else None
    return {"degrade_at_batches": degrade_at, "batches_per_partition_hour": rates,
            "hours_until_degraded": until, "busiest_partition": busiest,
            "first_degraded": first, "hours_to_first_degraded": finite.get(first)}


def kept_progressing(samples: Sequence[dict[str, Any]], jobs: Sequence[str],
                     window_s: float) -> dict[str, Any]:
    """Per job: batches run over the whole run and over its last `window_s`; the verdict
    is that every job advanced in that last window and its backlog did not keep growing."""
    last = samples[-1]
    recent = [s for s in samples if s["elapsed_s"] >= last["elapsed_s"] - window_s]
    verdict: dict[str, Any] = {}
    for job in jobs:
        ids = [(s["jobs"].get(job) or {}).get("batch_id") for s in samples]
        seen = [i for i in ids if i is not None]
        window_ids = [(s["jobs"].get(job) or {}).get("batch_id") for s in recent]
        window_ids = [i for i in window_ids if i is not None]
        backlogs = [(s["jobs"].get(job) or {}).get("backlog_messages") for s in recent]
        backlogs = [b for b in backlogs if b is not None]
        verdict[job] = {
            "batches_run": (seen[-1] - seen[0]) if seen else 0,
            "batches_last_window": (window_ids[-1] - window_ids[0]) if window_ids else 0,
            "backlog_last_window": {"min": min(backlogs), "max": max(backlogs),
                                    "last": backlogs[-1]} if backlogs else None,
        }
    advancing = all(v["batches_last_window"] > 0 for v in verdict.values())
    return {"window_s": window_s, "jobs": verdict, "all_advancing": advancing}
