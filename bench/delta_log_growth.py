"""A streaming sink's Delta append over thousands of commits: with Delta's default log (every
commit file kept 30 days) and with the sinks' short log (`maintenance.log_retention`).

delta-rs lists the whole `_delta_log` folder at each write, so without a bound the append of a
sink that commits every micro-batch gets slower with every commit the table ever had (fraud's
`fraud_alerts` 16 -> 76 ms over five minutes at 1k tx/s; BENCHMARKS.md, thirteenth session).
Each run appends a small alerts-like batch through the sinks' own path (append_once over
OpenTables, a compaction every 50 batches as `jobs.compact_every_batches`), in one process,
and reports the median append per eighth of the run and the log's size at the end.

    .venv/bin/python -m bench.delta_log_growth [--appends 4000] [--retentions none,60s]
        [--out PATH]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from bench.common import machine_info, publish_result
from spark_jobs.config.durations import parse_duration_ms
from spark_jobs.streaming.lake.delta import append_once, compact
from spark_jobs.streaming.lake.open_tables import OpenTables

NAME = "delta_log_growth"
COMPACT_EVERY = 50  # jobs.compact_every_batches' default
PARTS = 8


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"bench.{NAME}", description=__doc__.split("\n")[0])
    parser.add_argument("--appends", type=int, default=4000, help="commits per run")
    parser.add_argument("--retentions", default="none,60s",
                        help="log retentions to run, comma-separated ('none': Delta's default)")
    parser.add_argument("--out", default=None, help="result JSON (default bench/results/...)")
    return parser.parse_args(argv)


def alerts_batch() -> pa.Table:
    """Five alerts-like rows, about what a fraud batch at 1k tx/s writes."""
    return pa.table({"alert": pa.array(["x" * 200] * 5),
                     "rule_id": pa.array([1, 2, 3, 4, 5], pa.int64())})


def run(appends: int, retention_ms: int | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"tideline-bench-{NAME}-") as folder:
        uri = str(Path(folder) / "table")
        tables, data, seconds = OpenTables(retention_ms), alerts_batch(), []
        for batch_id in range(appends):
            started = time.perf_counter()
            append_once(uri, data, "bench", batch_id, tables=tables)
            seconds.append(time.perf_counter() - started)
            if batch_id and batch_id % COMPACT_EVERY == 0:
                compact(uri)
        log_files = sum(1 for _ in (Path(uri) / "_delta_log").iterdir())
    ms = np.asarray(seconds) * 1000
    part = max(1, appends // PARTS)
    return {"retention_ms": retention_ms, "appends": appends,
            "median_ms_by_part": [round(float(np.median(ms[i:i + part])), 1)
                                  for i in range(0, appends, part)],
            "log_files_at_end": log_files}


def summary_lines(result: dict[str, Any]) -> list[str]:
    lines = [f"{NAME}: median append (ms) per eighth of {result['params']['appends']} commits"]
    for r in result["runs"]:
        kept = "Delta's default" if r["retention_ms"] is None else f"{r['retention_ms']} ms"
        lines.append(f"  log kept {kept}: {r['median_ms_by_part']}; "
                     f"{r['log_files_at_end']} log files at the end")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    retentions = [None if r.strip() == "none" else parse_duration_ms(r.strip())
                  for r in args.retentions.split(",") if r.strip()]
    result = {"benchmark": NAME, "machine": machine_info(),
              "params": {"appends": args.appends, "compact_every": COMPACT_EVERY,
                         "retentions_ms": retentions},
              "runs": [run(args.appends, retention) for retention in retentions]}
    publish_result(NAME, args.out, result, summary_lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
