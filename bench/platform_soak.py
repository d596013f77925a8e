"""Soak: how long `tideline platform` can run on the embedded broker before it degrades.

The embedded broker (Tansu, memory storage) slows down with the number of record batches a
partition holds (`bench.tansu_batches` finds the point). The platform writes batches all
the time: the traffic generator, and every streaming job about one per output partition per
micro-batch. This benchmark runs the platform as a user does (`tideline platform`, embedded
defaults, in a temporary lake and Airflow home) and every --every seconds counts, exactly,
the stored record batches of every topic partition (raw Fetch requests, `kafka_wire`), reads
each job's progress (batch id, backlog against the partitions' ends, watermark) and the
broker's RSS and CPU. From the steady batches/partition/hour it extrapolates when the
busiest partition reaches --degrade-at batches, and says whether every job kept advancing.

One difference from a user's start: the broker is the same Tansu command, started by the
benchmark on a free port and handed to the platform as kafka.bootstrap, so that an hour of
soak does not hold the embedded broker's fixed port (19092) that tests and demos need. The
platform then skips only its own broker start and the clearing of an earlier broker's
checkpoints (a fresh lake has none).

    .venv/bin/python -m bench.platform_soak [--minutes M] [--every S] [--degrade-at N]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psutil
import yaml

from bench.common import machine_info, publish_result
from bench.kafka_wire import BatchCounter
from bench.soak_samples import extrapolate, kept_progressing, take_sample

READY_TIMEOUT_S = 300.0
STOP_TIMEOUT_S = 180.0
PROGRESS_WINDOW_S = 600.0
SENSITIVITY = (7_000, 9_000, 12_000, 20_000, 30_000)  # batch counts the point could be at
BANNER = re.compile(r"Tideline is running\.")


def platform_config(root: Path, bootstrap: str) -> Path:
    """Lake, Airflow home and ports in `root`; validation starts today (no catch-up)."""
    from spark_jobs.local.broker import free_port

    config = {
        "kafka": {"bootstrap": bootstrap},
        "lake": {"root": str(root / "lake")},
        "airflow": {"home": str(root / "airflow_home"), "port": free_port()},
        "dashboard": {"port": free_port()},
        "validation": {"start_date": datetime.datetime.now(datetime.UTC).date().isoformat()},
    }
    path = root / "tideline.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def start_platform(root: Path, config: Path, users: int) -> subprocess.Popen[bytes]:
    """`tideline platform` in a session of its own, output to root/platform.out."""
    from spark_jobs.local.broker import free_port

    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "TIDELINE_"))}
    env |= {"TIDELINE_CONFIG": str(config), "PYTHONUNBUFFERED": "1",
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port())}
    tideline = Path(sys.executable).with_name("tideline")
    with (root / "platform.out").open("wb") as out:
        return subprocess.Popen(
            [str(tideline), "platform", "--users", str(users)], env=env,
            cwd=Path(__file__).resolve().parents[1], stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True,
        )


def wait_ready(process: subprocess.Popen[bytes], output: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if BANNER.search(output.read_text(errors="replace")):
            return
        if process.poll() is not None:
            raise RuntimeError(f"platform exited:\n{output.read_text()[-3000:]}")
        time.sleep(2.0)
    raise RuntimeError(f"platform not running after {READY_TIMEOUT_S:.0f} s")


def stop_platform(process: subprocess.Popen[bytes], root: Path) -> list[int]:
    """Ctrl-C as a user would; then SIGKILL whatever it left that names our root (all
    started by this run: the platform, Airflow and the jobs it deployed). Returns those."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGINT)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=STOP_TIMEOUT_S)
    left = [pid for pid in _pids_naming(root) if pid != os.getpid()]
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    return left


def _pids_naming(root: Path) -> list[int]:
    needle = str(root)
    found = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if any(needle in text for text in [*process.environ().values(),
                                               *process.cmdline()]):
                found.append(process.pid)
    return found


def soak(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    from spark_jobs.local.broker import EmbeddedBroker
    from spark_jobs.settings import load_settings

    samples: list[dict[str, Any]] = []
    with EmbeddedBroker(port=0, log_path=root / "tansu.log") as broker:
        config = platform_config(root, broker.bootstrap)
        jobs = load_settings(environ={"TIDELINE_CONFIG": str(config)}).monitor.jobs
        process = start_platform(root, config, args.users)
        started = time.monotonic()
        left: list[int] = []
        try:
            wait_ready(process, root / "platform.out")
            counter = BatchCounter(broker.bootstrap)
            while time.monotonic() - started < args.minutes * 60:
                time.sleep(max(0.0, args.every - (time.monotonic() - started) % args.every))
                if process.poll() is not None:
                    print("platform exited early", flush=True)
                    break
                try:
                    sample = take_sample(counter, started, root / "lake" / "_progress", jobs,
                                         broker.pid or 0)
                except Exception as exc:  # one bad read must not end an hour of soak
                    print(f"sample failed: {exc!r}", flush=True)
                    continue
                samples.append(sample)
                print(_sample_line(sample), flush=True)
        finally:
            left = stop_platform(process, root)
        platform_tail = (root / "platform.out").read_text(errors="replace")[-2000:]
    return {"jobs": list(jobs), "samples": samples, "killed_leftovers": left,
            "platform_exit": process.returncode, "platform_output_tail": platform_tail}


def _sample_line(sample: dict[str, Any]) -> str:
    busiest = max(sample["batches"].items(), key=lambda kv: kv[1], default=("-", 0))
    jobs = " ".join(f"{job}:{(p or {}).get('batch_id')}/{(p or {}).get('backlog_messages')}"
                    for job, p in sample["jobs"].items())
    return (f"{sample['elapsed_s']:7.0f}s busiest {busiest[0]}={busiest[1]} "
            f"broker {sample['broker']['rss_mb']} MB {sample['broker']['cpu_s']} cpu-s "
            f"read {sample['count_read_s']} s | jobs batch/backlog {jobs}")


def summary(result: dict[str, Any]) -> list[str]:
    found = result.get("extrapolation") or {}
    rates = found.get("batches_per_partition_hour", {})
    lines = [f"{result['parameters']['minutes']} min soak, {len(result['samples'])} samples"]
    for key, rate in sorted(rates.items(), key=lambda kv: -kv[1]):
        last = result["samples"][-1]["batches"][key]
        lines.append(f"  {key:40s} {last:7d} batches  {rate:8.1f}/h  "
                     f"degraded at {found['hours_until_degraded'][key]} h")
    lines.append(f"first degraded: {found.get('first_degraded')} after "
                 f"{found.get('hours_to_first_degraded')} h "
                 f"(at {found.get('degrade_at_batches')} batches)")
    lines.append(f"hours if it degraded at: {result.get('hours_to_first_degraded_if_degraded_at')}")
    progress = result.get("progress") or {}
    lines.append(f"jobs kept advancing: {progress.get('all_advancing')} "
                 f"{progress.get('jobs')}")
    return lines


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench.platform_soak", description="Record batches per partition under the platform."
    )
    parser.add_argument("--minutes", type=float, default=60.0, help="how long to run")
    parser.add_argument("--every", type=float, default=60.0, help="seconds between samples")
    parser.add_argument("--users", type=int, default=10_000, help="tideline platform --users")
    parser.add_argument("--degrade-at", type=int, default=9_000,
                        help="batches per partition where the jobs' 10 ms fetches go unanswered "
                             "(bench.tansu_batches)")
    parser.add_argument("--label", help="suffix of the result file name")
    parser.add_argument("--out", help="result file (default bench/results/platform_soak-DATE)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    machine = machine_info()
    with tempfile.TemporaryDirectory(prefix="tideline-bench-soak-") as folder:
        run = soak(Path(folder), args)
    result: dict[str, Any] = {"benchmark": "platform_soak", "machine": machine,
                              "parameters": vars(args), **run}
    if len(run["samples"]) >= 3:
        result["extrapolation"] = extrapolate(run["samples"], args.degrade_at)
        result["hours_to_first_degraded_if_degraded_at"] = {
            n: extrapolate(run["samples"], n)["hours_to_first_degraded"] for n in SENSITIVITY}
        result["progress"] = kept_progressing(run["samples"], run["jobs"], PROGRESS_WINDOW_S)
    name = f"platform_soak-{args.label}" if args.label else "platform_soak"
    publish_result(name, args.out, result, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
