"""MapState calls one per key against pipelined (spark_jobs/streaming/map_state_batch.py), in
the same transformWithStateInPandas task, alternating, so that both see the same load.

A batch query groups `--groups` rows by a key; for each group the processor writes and
reads `--keys` new map entries one call per key, then as many other new entries pipelined,
`--rounds` times in alternation; wall and worker-CPU microseconds per call, best and median
over rounds and groups. On a shared box only this same-task comparison means much.

    .venv/bin/python -m bench.map_state_calls [--keys N] [--rounds R] [--groups G] [--out F]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pandas as pd
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from bench.common import bench_settings, machine_info, publish_result, sandbox
from spark_jobs.streaming.map_state_batch import get_values, update_values

NAME = "map_state_calls"
_KEY = StructType([StructField("view_id", StringType(), False)])
_VALUE = StructType([StructField(n, LongType(), False) for n in ("ts", "user_id", "post_id")])
_OUT = StructType([StructField("style", StringType()), StructField("op", StringType()),
                   StructField("calls", LongType()), StructField("wall_s", DoubleType()),
                   StructField("cpu_s", DoubleType())])


class CallTimer(StatefulProcessor):
    """Times `keys` updates then gets, one call per key and pipelined, in alternation."""

    def __init__(self, keys: int, rounds: int) -> None:
        self.keys, self.rounds = keys, rounds

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.map = handle.getMapState("firsts", _KEY, _VALUE)

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame],
                        timerValues: Any) -> Iterator[pd.DataFrame]:
        for _ in rows:
            pass
        out = []
        for r in range(self.rounds):
            for style in ("per_key", "pipelined"):
                keys = [(f"{key[0]}-{r}-{style}-{i}",) for i in range(self.keys)]
                items = [(k, (i, i, i)) for i, k in enumerate(keys)]
                out.append(self._timed(style, "update", len(items), lambda items=items,
                           style=style: self._update(style, items)))
                probe = keys[::2] + [(f"absent-{k[0]}",) for k in keys[1::2]]
                out.append(self._timed(style, "get", len(probe), lambda probe=probe,
                           style=style: self._get(style, probe)))
        yield pd.DataFrame(out, columns=_OUT.fieldNames())

    def _update(self, style: str, items: list) -> None:
        if style == "pipelined":
            update_values(self.map, items)
        else:
            for k, v in items:
                self.map.updateValue(k, v)

    def _get(self, style: str, keys: list) -> None:
        if style == "pipelined":
            get_values(self.map, keys)
        else:
            for k in keys:
                self.map.getValue(k)

    @staticmethod
    def _timed(style: str, op: str, calls: int, run: Any) -> tuple:
        wall, cpu = time.perf_counter(), time.process_time()
        run()
        return (style, op, calls, time.perf_counter() - wall, time.process_time() - cpu)

    def close(self) -> None:
        pass


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"bench.{NAME}", description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=2_000, help="calls per timing (2000)")
    parser.add_argument("--rounds", type=int, default=5, help="alternations per group (5)")
    parser.add_argument("--groups", type=int, default=4, help="groups, 2 tasks (4)")
    parser.add_argument("--out", default=None, help="result JSON (default bench/results/...)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    from spark_jobs.streaming.spark_session import build_session

    args = parse_args(argv)
    machine = machine_info()
    with sandbox(NAME) as box:
        spark = build_session(bench_settings(box, {}), app_name=f"tideline-bench-{NAME}")
        try:
            df = spark.range(args.groups).selectExpr("id AS g")
            rows = df.groupBy("g").transformWithStateInPandas(
                CallTimer(args.keys, args.rounds), _OUT, "Append", "None").toPandas()
        finally:
            spark.stop()
    summary: dict[str, Any] = {}
    for (style, op), part in rows.groupby(["style", "op"]):
        per_call = part["wall_s"] / part["calls"] * 1e6
        cpu = part["cpu_s"] / part["calls"] * 1e6
        summary[f"{op}_{style}"] = {
            "wall_us_per_call_median": round(float(statistics.median(per_call)), 1),
            "wall_us_per_call_best": round(float(per_call.min()), 1),
            "worker_cpu_us_per_call_median": round(float(statistics.median(cpu)), 1),
            "timings": len(part)}
    for op in ("update", "get"):
        summary[f"{op}_speedup_median"] = round(
            summary[f"{op}_per_key"]["wall_us_per_call_median"]
            / summary[f"{op}_pipelined"]["wall_us_per_call_median"], 2)
    result = {"benchmark": NAME, "machine": machine, "params": vars(args), "summary": summary}
    publish_result(NAME, args.out, result,
                   lambda r: [f"{k}: {v}" for k, v in r["summary"].items()])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
