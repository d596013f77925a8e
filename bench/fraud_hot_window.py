"""CPU time per transaction of one hot key's exact window at steady state (issue 15).

A busy key's window holds every transaction of the window's span: at 10k transactions/s a
beneficiary with 0.3 % of them holds ~54,000 entries in a 30-minute window. At steady state
each of its transactions cuts the oldest entry, appends its own and aggregates; what that
costs must not grow with the window, or a long run slows down as its hot keys fill up
(BENCHMARKS.md, 2026-11-30). Measured per aggregator and window length, on the window alone
(`ExactWindow`, as the engine drives it, with the change log's take every `--batch`
transactions); a digest of every answer shows two commits answer alike.

    .venv/bin/python -m bench.fraud_hot_window [--lengths 1000,10000,50000] [--steps 20000]
        [--repeats 3] [--label after] [--out PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import random
import time
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from bench.common import machine_info, publish_result
from spark_jobs.fraud.core.aggregates import Aggregator
from spark_jobs.fraud.core.windows import ExactWindow

NAME = "fraud_hot_window"
COUNTED = "COUNT"  # a COUNT_* field's rule: its window answers how many entries it holds


def amounts(count: int, seed: int = 3) -> list[str]:
    """Payment amounts as their JSON text (cents, some with fewer places: 21.5, 30.0)."""
    rng = random.Random(seed)
    return [str(round(rng.lognormvariate(3.4, 1.2), 2)) for _ in range(count)]


def run_once(kind: str, length: int, steps: int, batch: int) -> dict[str, Any]:
    """`steps` transactions of one key through a window already holding `length` entries."""
    texts = amounts(length + steps)
    window = ExactWindow(list(range(length)), texts[:length])
    digest = hashlib.sha256()
    aggregator = None if kind == COUNTED else Aggregator[kind]
    window.take_log_delta()
    started = time.process_time()
    for at in range(length, length + steps):
        text = texts[at]
        window.expire(at, length - 1)  # cuts the oldest: the newest length - 1 stay
        window.add(at, Decimal(text), text)  # and this one: `length` entries, all in range
        if aggregator is None:
            result: Any = window.count_in(at, length - 1)
        else:
            result = window.aggregate(aggregator, at, length - 1)
        digest.update(str(result).encode())
        if at % batch == 0:
            window.take_log_delta()
    cpu_s = time.process_time() - started
    return {"cpu_us_per_tx": round(cpu_s / steps * 1e6, 2), "digest": digest.hexdigest()[:16]}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"bench.{NAME}", description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", default="1000,10000,50000")
    parser.add_argument("--kinds", default="SUM,AVG,MIN,MAX,COUNT")
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--label", default="", help="recorded with the result (before/after)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    cells: dict[str, dict[str, Any]] = {}
    for kind in args.kinds.split(","):
        for length in map(int, args.lengths.split(",")):
            runs = [run_once(kind, length, args.steps, args.batch) for _ in range(args.repeats)]
            cells[f"{kind}/{length}"] = {
                "best_cpu_us_per_tx": min(r["cpu_us_per_tx"] for r in runs),
                "runs": [r["cpu_us_per_tx"] for r in runs], "digest": runs[0]["digest"]}
    result = {"benchmark": NAME, "label": args.label, "machine": machine_info(),
              "steps": args.steps, "batch": args.batch, "cells": cells}

    def summary(res: dict[str, Any]) -> list[str]:
        return [f"{cell:>12}: {c['best_cpu_us_per_tx']:8.2f} CPU µs/tx (digest {c['digest']})"
                for cell, c in res["cells"].items()]

    publish_result(NAME, args.out, result, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
