"""CPU time of a command's whole process tree: the job, its JVM and every Python worker.

Why: on a shared, loaded box wall time says little, and a job's CPU is spread over processes
that outlive the job's own (Spark's JVM is not waited for by pyspark, and its Python daemons
and workers are the JVM's children). Making this process a child subreaper (Linux
PR_SET_CHILD_SUBREAPER) gives it the orphans of the tree; reaping them all adds their CPU to
RUSAGE_CHILDREN, so the difference around a run is the CPU of everything it started.

    .venv/bin/python -m bench.tree_cpu COMMAND [ARG ...]
"""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import sys
import time

import psutil

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Adopt the orphaned descendants of this process (False where Linux's prctl is absent)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def descendants() -> set[int]:
    """Process ids below this process now."""
    return {child.pid for child in psutil.Process().children(recursive=True)}


def reap_new(before: set[int], timeout_s: float = 60.0) -> int:
    """Wait until every descendant not in `before` (the run's, adopted orphans included) has
    exited, and reap them; returns how many were reaped. Long-lived processes started before
    the run (a broker) are left alone. Stops at the timeout."""
    reaped, deadline = 0, time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped  # no children left
        if pid:
            reaped += 1
            continue
        if not descendants() - before:
            return reaped
        time.sleep(0.05)
    return reaped


def children_cpu_s() -> float:
    """CPU seconds (user + system) of the reaped descendants so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str]) -> int:
    """Run a command; print its wall time and the CPU time of its whole process tree."""
    become_subreaper()
    cpu_before, started = children_cpu_s(), time.monotonic()
    code = subprocess.run(argv, check=False).returncode
    wall = time.monotonic() - started
    reap_new(set())
    print(f"tree_cpu: {wall:.1f} s wall, {children_cpu_s() - cpu_before:.1f} CPU s "
          f"(exit {code}): {' '.join(argv)}", file=sys.stderr)
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
