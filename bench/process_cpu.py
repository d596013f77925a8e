"""The CPU of every process a benchmark run starts, by role, per slice of the run (from /proc).

Which process takes the machine's two cores as a run goes on: over 300 s at 1,000 tx/s the
embedded broker's share grew from 13 to 66 % of a core while the fraud engines stayed at
~17 % (BENCHMARKS.md, fourteenth session). A background thread reads the CPU ticks of this
process and all its descendants once a second; each is given a role by its command line.
A process that starts during the run counts from zero; what one uses between its last
sample and its exit is not counted (at most a second's worth: a forked snapshot child of
1.5-3 s is counted but for its last second, at most).

    with ProcessCpu() as cpu:
        ...  # the run
    cpu.by_slice(start_s, 10)  # [{"from_s": 0, "broker": 12.8, ...}, ...] in % of a core
"""

from __future__ import annotations

import os
import threading
import time
from collections import defaultdict
from typing import Any

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# (role, a text its command line holds), the first match wins
ROLES = (("broker", "tansu"), ("jvm", "java"), ("engines", "engine_process"),
         ("engines", "shard_host"),
         ("traffic", "multiprocessing.spawn"), ("python_workers", "pyspark"),
         ("python_workers", "spark_jobs.streaming.worker_daemon"))
SNAPSHOTS = "engine_snapshots"  # an engine's forked child: niceness 19, an engine's command


Stat = tuple[int, int, int, int]  # parent pid, CPU ticks, niceness, start time (ticks)


def _stat(pid: int) -> Stat | None:
    """A process's Stat, None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[16]), int(fields[19])


def _command(pid: int) -> str:
    """The process's command line, "" if it is gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def role_of(command: str, niceness: int, root: bool) -> str:
    """What a process is to the run: the first ROLES marker its command holds ("driver" for
    the run's own process); an engine's forked child, niced, is a snapshot being written."""
    if root:
        return "driver"
    for role, marker in ROLES:
        if marker in command:
            return SNAPSHOTS if role == "engines" and niceness > 0 else role
    return "other"


class ProcessCpu:
    """Samples, once every `every_s`, the CPU ticks each role used since the last sample."""

    def __init__(self, every_s: float = 1.0) -> None:
        self.every_s = every_s
        self.root = os.getpid()
        self.samples: list[tuple[float, dict[str, float]]] = []  # (time, role -> CPU s)
        # by (pid, start time): a pid used again is another process
        self._ticks: dict[tuple[int, int], int] = {}
        self._roles: dict[tuple[int, int], str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="process-cpu", daemon=True)

    def __enter__(self) -> ProcessCpu:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self._sample()

    def _sample(self) -> None:
        stats = {}
        for name in os.listdir("/proc"):
            if name.isdigit() and (stat := _stat(int(name))) is not None:
                stats[int(name)] = stat
        first = not self.samples  # what ran before the run started is not the run's
        used: dict[str, float] = defaultdict(float)
        for pid in self._descendants(stats):
            _, ticks, niceness, started = stats[pid]
            key = (pid, started)
            if key not in self._roles or (niceness > 0 and self._roles[key] == "engines"):
                self._roles[key] = role_of(_command(pid), niceness, pid == self.root)
            before = self._ticks.get(key, ticks if first else 0)
            used[self._roles[key]] += (ticks - before) / CLOCK_TICKS
            self._ticks[key] = ticks
        self.samples.append((time.time(), dict(used)))

    def _descendants(self, stats: dict[int, Stat]) -> list[int]:
        children: dict[int, list[int]] = defaultdict(list)
        for pid, (parent, *_) in stats.items():
            children[parent].append(pid)
        found, stack = [], [self.root]
        while stack:
            pid = stack.pop()
            if pid in stats:
                found.append(pid)
            stack.extend(children.get(pid, ()))
        return found

    def by_slice(self, start_s: float, slice_s: float) -> list[dict[str, Any]]:
        """% of a core per role in each slice of `slice_s` from `start_s` (epoch seconds),
        and `total`; a sample counts in the slice its interval starts in."""
        slices: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for (before, _), (at, used) in zip(self.samples, self.samples[1:], strict=False):
            if before < start_s:
                continue
            index = int((before - start_s) // slice_s)
            for role, seconds in used.items():
                slices[index][role] += seconds
            slices[index]["_covered_s"] += at - before
        rows = []
        for index in sorted(slices):
            covered = slices[index].pop("_covered_s")
            row: dict[str, Any] = {"from_s": index * slice_s}
            row.update({role: round(100 * seconds / covered, 1)
                        for role, seconds in sorted(slices[index].items())})
            row["total"] = round(sum(v for k, v in row.items() if k != "from_s"), 1)
            rows.append(row)
        return rows
