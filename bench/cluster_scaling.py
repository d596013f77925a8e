"""Throughput of the metrics pipeline and fraud_rules (spark state) on a standalone cluster of
1 worker versus 2 workers of 1 core each.

For each worker count it starts a private cluster (`tideline cluster`'s own code, free ports,
a temporary home), runs `bench.pipeline_throughput` and `bench.fraud_throughput --state
spark` against its master as separate processes (the bench process is the driver, as
`tideline job run` is), and stops the cluster. With `--local` it also runs both on
`local[2]` for reference. The ratio 2-workers / 1-worker is what scaling out buys here; on a
2-core machine the driver, the broker and both executors share the same two cores (each run
records the load average).

    .venv/bin/python -m bench.cluster_scaling [--messages N] [--transactions M] [--local]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import machine_info, publish_result
from spark_jobs.cluster.settings import ClusterSettings
from spark_jobs.cluster.standalone import start_cluster, stop_cluster
from spark_jobs.local.broker import free_port
from spark_jobs.settings import load_settings

NAME = "cluster_scaling"
WORKER_MEMORY = "3g"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"bench.{NAME}", description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=200_000,
                        help="input messages of the metrics pipeline run (default 200000)")
    parser.add_argument("--limit", type=int, default=50_000,
                        help="jobs.max_records_per_trigger of the pipeline (default 50000)")
    parser.add_argument("--transactions", type=int, default=60_000,
                        help="transactions of the fraud_rules run (default 60000)")
    parser.add_argument("--workers", default="1,2", help="worker counts to compare (default 1,2)")
    parser.add_argument("--local", action="store_true", help="also run both on local[2]")
    parser.add_argument("--out", default=None, help="result JSON (default bench/results/...)")
    return parser.parse_args(argv)


def cluster_settings(home: Path, workers: int) -> ClusterSettings:
    """A private cluster: free ports, its own home, `workers` workers of 1 core."""
    ports = {key: free_port() for key in ("master_port", "master_ui_port", "worker_ui_port",
                                          "history_port")}
    return load_settings(environ={}, overrides={"cluster": {
        **ports, "home": str(home), "workers": workers, "worker_cores": 1,
        "worker_memory": WORKER_MEMORY}}).cluster


def run_bench(module: str, args: list[str], out: Path) -> dict[str, Any]:
    """One benchmark in its own process (its own driver JVM); its JSON result."""
    command = [sys.executable, "-m", f"bench.{module}", *args, "--out", str(out)]
    print("  $", " ".join(command[1:]), flush=True)
    subprocess.run(command, check=True)
    return json.loads(out.read_text())


def pipeline_run(args: argparse.Namespace, master: str, folder: Path) -> dict[str, Any]:
    result = run_bench("pipeline_throughput", [
        "--messages", str(args.messages), "--limit", str(args.limit), "--no-ceiling",
        "--master", master], folder / "pipeline.json")
    jobs = result["jobs"]
    return {
        "input_msg_per_s": result["wall"]["input_msg_per_s"],
        "wall_s": result["wall"]["seconds"],
        "messages": result["workload"]["messages"],
        "rows_per_s_in_batches": {name: job.get("rows_per_s_in_batches")
                                  for name, job in jobs.items()},
        "load_average_at_end": result["machine"]["load_average_at_end"],
    }


def fraud_run(args: argparse.Namespace, master: str, folder: Path) -> dict[str, Any]:
    result = run_bench("fraud_throughput", [
        "--state", "spark", "--configs", "0:2", "--spark-transactions", str(args.transactions),
        "--transactions", "1000", "--event-rates", "1000", "--master", master],
        folder / "fraud.json")
    job = result["jobs"][0]
    return {
        "tx_per_s_end_to_end": job["tx_per_s_end_to_end"],
        "tx_per_s_after_first_batch": job["tx_per_s_after_first_batch"],
        "wall_s": job["wall_s"],
        "alerts": job["alerts"],
        "engine_alerts_same_traffic": job["engine_alerts_same_traffic"],
        "load_average_at_end": result["machine"]["load_average_at_end"],
    }


def measure(args: argparse.Namespace, label: str, master: str, folder: Path) -> dict[str, Any]:
    print(f"{label}: {master}", flush=True)
    folder.mkdir(parents=True, exist_ok=True)
    return {"label": label, "master": master,
            "pipeline": pipeline_run(args, master, folder),
            "fraud_rules": fraud_run(args, master, folder)}


def on_cluster(args: argparse.Namespace, workers: int, folder: Path) -> dict[str, Any]:
    cluster = cluster_settings(folder / "cluster", workers)
    try:
        start_cluster(cluster)
        return measure(args, f"{workers} worker(s) x 1 core", cluster.master_url, folder)
    finally:
        stop_cluster(cluster)


def summary_lines(result: dict[str, Any]) -> list[str]:
    lines = [f"{NAME}: metrics pipeline and fraud_rules (spark state), 1 core per worker"]
    for run in result["runs"]:
        pipe, fraud = run["pipeline"], run["fraud_rules"]
        lines.append(
            f"  {run['label']:<22} pipeline {pipe['input_msg_per_s']:>7,} msg/s end to end "
            f"({pipe['messages']:,} in {pipe['wall_s']} s); fraud_rules "
            f"{fraud['tx_per_s_after_first_batch']:>7,} tx/s after the first batch "
            f"({fraud['tx_per_s_end_to_end']:,} end to end, alerts {fraud['alerts']:,} = engine "
            f"{fraud['engine_alerts_same_traffic']:,})")
    ratios = result.get("ratios") or {}
    if ratios:
        lines.append(f"  2 workers / 1 worker: pipeline {ratios['pipeline']:.2f}x, "
                     f"fraud_rules {ratios['fraud_rules']:.2f}x")
    return lines


def ratios(runs: list[dict[str, Any]]) -> dict[str, float]:
    by_label = {run["label"]: run for run in runs}
    one, two = by_label.get("1 worker(s) x 1 core"), by_label.get("2 worker(s) x 1 core")
    if not (one and two):
        return {}
    return {
        "pipeline": two["pipeline"]["input_msg_per_s"] / one["pipeline"]["input_msg_per_s"],
        "fraud_rules": (two["fraud_rules"]["tx_per_s_after_first_batch"]
                        / one["fraud_rules"]["tx_per_s_after_first_batch"]),
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    machine = machine_info()
    runs = []
    with tempfile.TemporaryDirectory(prefix=f"tideline-bench-{NAME}-") as tmp:
        if args.local:
            runs.append(measure(args, "local[2]", "local[2]", Path(tmp) / "local"))
        for workers in (int(n) for n in args.workers.split(",") if n.strip()):
            runs.append(on_cluster(args, workers, Path(tmp) / f"workers{workers}"))
    result = {"benchmark": NAME, "machine": machine,
              "params": {"messages": args.messages, "limit": args.limit,
                         "transactions": args.transactions, "worker_memory": WORKER_MEMORY},
              "runs": runs, "ratios": ratios(runs)}
    publish_result(NAME, args.out, result, summary_lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
