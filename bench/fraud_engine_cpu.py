"""CPU time per transaction of the pure fraud engine, and a digest of its alerts (issue 15).

The box these benchmarks run on is shared and loaded, so wall time says little; CPU time
(process_time) of the same work, best of a few repeats, compares two commits run back to
back. The digest (every alert's rule, key, aggregate and transaction, in order) shows that a
faster engine emits the very same alerts.

Traffic: bench.fraud_throughput's (ten benchmark rules, event time at `--event-rate`), fed in
batches of `--batch` with the job's watermark and clean-up timer. Stores:
- `pickled`: MemoryStore(pickled=True), bench.fraud_throughput's engine part;
- `logged`: the LoggedStore both job modes run over, take_changes() after every batch and
  the collector settings of the driver sink's engine (a raised young
  threshold, a young collection and gc.freeze() after every batch: processors/resident.py).

    .venv/bin/python -m bench.fraud_engine_cpu [--transactions 40000] [--repeats 3] [--shards 1]
        [--stores pickled,logged] [--label before] [--out PATH]
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import time
from collections.abc import Sequence
from typing import Any

from bench.common import machine_info, publish_result
from bench.fraud_throughput import LATENESS, traffic
from spark_jobs.config.durations import parse_duration_ms
from spark_jobs.fraud.core.changelog import LoggedStore
from spark_jobs.fraud.core.engine import FraudEngine, MemoryStore
from spark_jobs.fraud.core.rule_routing import for_shard
from spark_jobs.fraud.processors.resident import raise_young_threshold, settle_garbage_collector
from spark_jobs.fraud.traffic import benchmark_rules, transaction_text

NAME = "fraud_engine_cpu"
START_MS = 1_795_000_000_000  # fixed, so that the alerts digest compares across runs


def benchmark_traffic(count: int, event_rate: float) -> tuple[list[str], list[int]]:
    """The transactions' texts and event times (bench.fraud_throughput's traffic, a fixed
    start so that alert digests compare across runs)."""
    profile = traffic(count, event_rate, START_MS)
    return [transaction_text(t) for t in profile], [t["eventTime"] for t in profile]


def run_once(texts: list[str], times: list[int], store_kind: str, batch: int,
             shard: int = 0, shards: int = 1) -> dict[str, Any]:
    """One pass over the traffic with a fresh engine holding shard `shard` of `shards` of the
    rules (fraud.core.rule_routing): CPU µs per transaction and the alerts."""
    store = LoggedStore() if store_kind == "logged" else MemoryStore(pickled=True)
    engine = FraudEngine(store)
    for text in benchmark_rules():
        if for_shard(text, shard, shards):
            engine.on_rule(text, times[0] - 1000)
    lateness = parse_duration_ms(LATENESS)
    digest, alerts, values = hashlib.sha256(), 0, []
    watermark, timer = -(2**62), None
    threshold = gc.get_threshold()
    if store_kind == "logged":
        raise_young_threshold()
    gc.collect()
    cpu_started = time.process_time()
    for first in range(0, len(texts), batch):
        for text in texts[first:first + batch]:
            for out in engine.on_transaction(text, watermark, 0):
                alerts += 1
                digest.update(out.value.encode())
                values.append(out.value)
        if timer is not None and timer <= watermark:
            engine.cleanup(watermark)
        timer = engine.next_cleanup_ms(watermark)
        if isinstance(store, LoggedStore):
            store.take_changes()
            settle_garbage_collector(first // batch + 1)
        watermark = max(watermark, max(times[first:first + batch]) - lateness)
    cpu_s = time.process_time() - cpu_started
    gc.unfreeze()
    gc.set_threshold(*threshold)
    return {"cpu_us_per_tx": round(cpu_s / len(texts) * 1e6, 1), "alerts": alerts,
            "alerts_sha256": digest.hexdigest()[:16], "values": values}


def run_sharded(texts: list[str], times: list[int], store_kind: str, batch: int,
                shards: int) -> dict[str, Any]:
    """Every shard's engine in turn (as the driver's engine processes run them at once): CPU
    per transaction of each, and a digest of all alerts in sorted order (which compares a
    split with one engine)."""
    runs = [run_once(texts, times, store_kind, batch, shard, shards) for shard in range(shards)]
    values = sorted(value for run in runs for value in run.pop("values"))
    sorted_digest = hashlib.sha256("\n".join(values).encode()).hexdigest()[:16]
    cpu = [run["cpu_us_per_tx"] for run in runs]
    return {"cpu_us_per_tx": round(sum(cpu), 1), "critical_path_cpu_us_per_tx": max(cpu),
            "shards_cpu_us_per_tx": cpu, "alerts": len(values),
            "alerts_sha256": runs[0]["alerts_sha256"] if shards == 1 else None,
            "alerts_sorted_sha256": sorted_digest}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"bench.{NAME}", description=__doc__.split("\n")[0])
    parser.add_argument("--transactions", type=int, default=40_000)
    parser.add_argument("--event-rate", type=float, default=1000.0)
    parser.add_argument("--batch", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--stores", default="pickled,logged")
    parser.add_argument("--shards", type=int, default=1,
                        help="split the rules over this many engines (fraud.shards, driver "
                             "state), each measured alone")
    parser.add_argument("--label", default="", help="recorded with the result (before/after)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    machine = machine_info()
    # the alert text embeds no wall clock (now_ms 0): the digest compares across runs
    texts, times = benchmark_traffic(args.transactions, args.event_rate)
    runs: dict[str, list[dict[str, Any]]] = {}
    for kind in args.stores.split(","):
        runs[kind] = [run_sharded(texts, times, kind, args.batch, args.shards)
                      for _ in range(args.repeats)]
    result = {"benchmark": NAME, "label": args.label, "machine": machine,
              "transactions": args.transactions, "batch": args.batch, "shards": args.shards,
              "runs": runs,
              "best_cpu_us_per_tx": {k: min(r["cpu_us_per_tx"] for r in v)
                                     for k, v in runs.items()}}

    def summary(res: dict[str, Any]) -> list[str]:
        return [f"{kind}: best {res['best_cpu_us_per_tx'][kind]} CPU µs/tx of "
                f"{[r['cpu_us_per_tx'] for r in rs]} (per shard {rs[0]['shards_cpu_us_per_tx']}), "
                f"alerts {rs[0]['alerts']} sha {rs[0]['alerts_sha256']} sorted sha "
                f"{rs[0]['alerts_sorted_sha256']}" for kind, rs in res["runs"].items()]

    publish_result(NAME, args.out, result, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
