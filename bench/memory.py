"""Peak resident memory of a benchmark's processes, sampled while it runs.

Spark in local mode is three kinds of process: the driver's Python (this process), one JVM
(driver and executor together) and the Python workers the JVM forks for pandas UDFs and
stateful processors. Their peaks are what a machine must hold, so each kind is sampled
separately (workers summed by proportional set size, since they run side by side and share
the pages of the daemon they are forked from).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psutil

MB = 1024 * 1024


ENGINE_PROCESSES = ("spark_jobs.fraud.jobs.engine_process",
                    "spark_jobs.fraud.processors.shard_host")


def _kind(process: psutil.Process) -> str | None:
    """'jvm', 'python_workers' or 'fraud_engines' (the driver mode's engine processes, the
    spark mode's shard hosts) for a descendant of this process (None: something else)."""
    try:
        name = process.name()
        if name == "java":
            return "jvm"
        command = process.cmdline() if name.startswith("python") else []
        if any(engine in part for part in command for engine in ENGINE_PROCESSES):
            return "fraud_engines"
        if any("pyspark" in part for part in command):
            return "python_workers"
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None
    return None


def sample() -> dict[str, int]:
    """Resident bytes now: this process, its JVM, its Python workers (summed PSS), the fraud
    engines' processes (summed RSS)."""
    me = psutil.Process()
    sizes = {"driver_python": me.memory_info().rss, "jvm": 0, "python_workers": 0,
             "fraud_engines": 0, "python_worker_count": 0}
    for child in me.children(recursive=True):
        kind = _kind(child)
        if kind is None:
            continue
        try:
            # workers are forked from one daemon and share pages: their proportional share
            # (PSS) sums to what they hold together, their RSS would count shared pages twice
            sizes[kind] += (child.memory_full_info().pss if kind == "python_workers"
                            else child.memory_info().rss)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        if kind == "python_workers":
            sizes["python_worker_count"] += 1
    sizes["total"] = (sizes["driver_python"] + sizes["jvm"] + sizes["python_workers"]
                      + sizes["fraud_engines"])
    return sizes


class PeakMemory:
    """The peak of every figure of `sample()` over the sampled period."""

    def __init__(self, every_s: float = 1.0) -> None:
        self.every_s = every_s
        self.peaks: dict[str, int] = {}
        self.samples = 0
        self._stop = threading.Event()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                now = sample()
            except psutil.Error:
                now = {}
            for key, value in now.items():
                self.peaks[key] = max(self.peaks.get(key, 0), value)
            self.samples += 1
            self._stop.wait(self.every_s)

    def report(self) -> dict[str, Any]:
        peaks = {f"{key}_mb": round(value / MB) for key, value in self.peaks.items()
                 if key != "python_worker_count"}
        peaks["python_worker_count"] = self.peaks.get("python_worker_count", 0)
        peaks["samples"] = self.samples
        return peaks


@contextmanager
def peak_memory(every_s: float = 1.0) -> Iterator[PeakMemory]:
    """Sample in a daemon thread while the block runs."""
    peaks = PeakMemory(every_s)
    thread = threading.Thread(target=peaks._run, name="peak-memory", daemon=True)
    thread.start()
    try:
        yield peaks
    finally:
        peaks._stop.set()
        thread.join(timeout=5)
