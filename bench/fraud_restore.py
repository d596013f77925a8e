"""What a restarted fraud_rules job (driver state) pays to rebuild an engine's state.

The engine runs the benchmark traffic (ten rules, event time at `--event-rate`) in batches of
`--batch`, writing each batch's change file into a temporary checkpoint as the driver sink
does, with one snapshot after `--snapshot-at` of the transactions (0: none). A fresh
EngineHost then restores the state after the last batch, as a restarted job does: the
snapshot loaded and every change file after it replayed. Reported: CPU and wall seconds of
that restore (best of `--repeats`), the bytes it read, and the state's size, so that two
commits compare back to back.

    .venv/bin/python -m bench.fraud_restore [--transactions 300000] [--event-rate 10000]
        [--batch 10000] [--snapshot-at 0.5] [--repeats 3] [--label NAME] [--out PATH]
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from bench.common import machine_info, publish_result
from bench.fraud_engine_cpu import benchmark_traffic
from bench.fraud_throughput import LATENESS
from spark_jobs.config.durations import parse_duration_ms
from spark_jobs.fraud.core.changelog import LoggedStore
from spark_jobs.fraud.core.engine import FraudEngine
from spark_jobs.fraud.jobs.engine_host import EngineHost, HostSpec
from spark_jobs.fraud.jobs.engine_state_files import EngineStateFiles
from spark_jobs.fraud.processors.resident import raise_young_threshold, settle_garbage_collector
from spark_jobs.fraud.traffic import benchmark_rules

NAME = "fraud_restore"


def write_state(checkpoint: str, texts: list[str], times: list[int], batch: int,
                snapshot_after: int | None) -> dict[str, int]:
    """Run the engine over the traffic, one change file per batch (and one snapshot after
    batch `snapshot_after`): the files a job leaves in its checkpoint."""
    files = EngineStateFiles(checkpoint)
    store = LoggedStore()
    engine = FraudEngine(store)
    for text in benchmark_rules():
        engine.on_rule(text, times[0] - 1000)
    raise_young_threshold()
    lateness = parse_duration_ms(LATENESS)
    watermark, change_bytes, snapshot_bytes, batch_id = -(2**62), 0, 0, -1
    for batch_id, first in enumerate(range(0, len(texts), batch)):
        for text in texts[first:first + batch]:
            engine.on_transaction(text, watermark, 0)
        changes = store.take_changes()
        files.write_changes(batch_id, changes)
        change_bytes += len(changes)
        if batch_id == snapshot_after:
            snapshot = store.snapshot()
            files.write_snapshot(batch_id, snapshot)
            snapshot_bytes, change_bytes = len(snapshot), 0
        watermark = max(watermark, max(times[first:first + batch]) - lateness)
        settle_garbage_collector(batch_id + 1)
    windows = sum(len(keys) for keys in store.by_rule.values())
    gc.unfreeze()
    return {"last_batch": batch_id, "snapshot_bytes": snapshot_bytes,
            "change_bytes_replayed": change_bytes, "windows": windows,
            "seen_ids": len(store.seen)}


def restore_once(checkpoint: str, last_batch: int) -> dict[str, float]:
    spec = HostSpec(checkpoint, 0, 1, False, 0, parse_duration_ms("1h"), 1_000_000, 10_000)
    host = EngineHost(spec)
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    host.restore(last_batch)
    result = {"cpu_s": round(time.process_time() - cpu, 2),
              "wall_s": round(time.perf_counter() - wall, 2)}
    del host
    gc.unfreeze()
    gc.collect()
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"bench.{NAME}", description=__doc__.split("\n")[0])
    parser.add_argument("--transactions", type=int, default=300_000)
    parser.add_argument("--event-rate", type=float, default=10_000.0)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--snapshot-at", type=float, default=0.5,
                        help="share of the traffic after which a snapshot is taken (0: none)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--label", default="")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    machine = machine_info()
    texts, times = benchmark_traffic(args.transactions, args.event_rate)
    batches = -(-args.transactions // args.batch)
    snapshot_after = round(batches * args.snapshot_at) - 1 if args.snapshot_at > 0 else None
    with tempfile.TemporaryDirectory(prefix="fraud-restore-") as checkpoint:
        state = write_state(checkpoint, texts, times, args.batch, snapshot_after)
        runs = [restore_once(checkpoint, state["last_batch"]) for _ in range(args.repeats)]
    result: dict[str, Any] = {
        "benchmark": NAME, "label": args.label, "machine": machine,
        "params": {"transactions": args.transactions, "event_rate": args.event_rate,
                   "batch": args.batch, "snapshot_after_batch": snapshot_after},
        "state": state, "runs": runs,
        "best_cpu_s": min(r["cpu_s"] for r in runs), "best_wall_s": min(r["wall_s"] for r in runs)}

    def summary(res: dict[str, Any]) -> list[str]:
        s = res["state"]
        return [f"restore: best {res['best_cpu_s']} CPU s, {res['best_wall_s']} s wall of "
                f"{res['runs']}; snapshot {s['snapshot_bytes'] / 1e6:.1f} MB + "
                f"{s['change_bytes_replayed'] / 1e6:.1f} MB of change files replayed; "
                f"{s['windows']:,} windows, {s['seen_ids']:,} ids"]

    publish_result(NAME, args.out, result, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
