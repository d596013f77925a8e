"""Instructions per transaction of the fraud engine, counted by valgrind (issue 15).

The CPU time of `bench.fraud_engine_cpu` moves by 20-50 % from one minute to the next on
this shared box (BENCHMARKS.md, eleventh session), more than most single changes to the
engine are worth. The number of instructions the engine executes does not move: the same
traffic through the same code counts the same to a few parts in a thousand, so two commits
compare on one run each. It is blind to the cost of cache misses, which grow with the state
held (the CPU-time benchmarks show those), so it judges the work a change removes, not the
waiting on memory.

Each shard's engine runs bench.fraud_engine_cpu's `logged` pass over the same traffic under
`valgrind --tool=cachegrind --cache-sim=no` (~12x slower than native); a second run that
only makes the traffic and imports the same modules is subtracted. What is left is the
engine's pass with what the jobs do around it: its set-up, the change log taken after every
batch, the collector's settling, and freeing the state at the end.

    .venv/bin/python -m bench.fraud_engine_instructions [--transactions 200000]
        [--event-rate 10000] [--batch 5000] [--shards 2] [--label L] [--out PATH]

A worktree of another commit is measured with `PYTHONPATH=<worktree>` (the engine's modules
are imported from it; the benchmark's own from here).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from bench.common import machine_info, publish_result

NAME = "fraud_engine_instructions"
MODULE = "bench.fraud_engine_instructions"
_COUNT = re.compile(r"I\s+refs:\s+([\d,]+)")


def _child(transactions: int, event_rate: float, batch: int, shard: int | None,
           shards: int) -> None:
    """What valgrind counts: the traffic made, then (unless shard is None) one shard's pass."""
    from bench.fraud_engine_cpu import benchmark_traffic, run_once

    texts, times = benchmark_traffic(transactions, event_rate)
    if shard is not None:
        run = run_once(texts, times, "logged", batch, shard, shards)
        print(f"alerts {run['alerts']} sha {run['alerts_sha256']}", flush=True)


def _counted(args: argparse.Namespace, shard: int | None) -> tuple[int, str]:
    """Instructions of one child run, and what it printed."""
    command = ["valgrind", "--tool=cachegrind", "--cache-sim=no",
               "--cachegrind-out-file=/dev/null", sys.executable, "-m", MODULE, "--child",
               "--transactions", str(args.transactions), "--event-rate", str(args.event_rate),
               "--batch", str(args.batch), "--shards", str(args.shards),
               "--shard", "none" if shard is None else str(shard)]
    # str hashes seeded alike in every run: dict probing then takes the same steps
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    found = _COUNT.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"valgrind run failed ({done.returncode}): {done.stderr[-2000:]}")
    return int(found.group(1).replace(",", "")), done.stdout.strip()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=200_000)
    parser.add_argument("--event-rate", type=float, default=10_000.0)
    parser.add_argument("--batch", type=int, default=5_000)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--shard", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--label", default="", help="recorded with the result (before/after)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.child:
        shard = None if args.shard in (None, "none") else int(args.shard)
        _child(args.transactions, args.event_rate, args.batch, shard, args.shards)
        return 0
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: apt-get install valgrind", file=sys.stderr)
        return 2
    baseline, _ = _counted(args, None)
    shards: list[dict[str, Any]] = []
    for shard in range(args.shards):
        total, printed = _counted(args, shard)
        per_tx = (total - baseline) / args.transactions
        shards.append({"shard": shard, "instructions": total, "per_transaction": round(per_tx),
                       "printed": printed})
        print(f"shard {shard}: {per_tx:,.0f} instructions per transaction ({printed})",
              flush=True)
    import spark_jobs  # where the engine measured came from (PYTHONPATH: a worktree)

    result = {"machine": machine_info(), "label": args.label,
              "spark_jobs": os.path.dirname(spark_jobs.__file__),
              "transactions": args.transactions,
              "event_rate": args.event_rate, "batch": args.batch,
              "baseline_instructions": baseline, "shards": shards,
              "per_transaction_all_shards": sum(s["per_transaction"] for s in shards)}
    publish_result(NAME, args.out, result, lambda r: [
        f"all shards: {r['per_transaction_all_shards']:,} instructions per transaction"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
