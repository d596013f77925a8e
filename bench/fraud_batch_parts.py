"""What grows over a long fraud_rules run: `bench.fraud_latency` with each part of a batch
timed, as medians per 30 s of the run.

Spark's own parts come from the query's progress (triggerExecution, addBatch, ...); the driver
sink's background work is timed by wrapping its methods: the engines' evaluation and their
other calls (`tog_<method>`), the delivery, the alerts' publishing, the commit and its Delta
append. Found with it: the `fraud_alerts` append growing with every commit the table ever had
(BENCHMARKS.md, thirteenth session).

    .venv/bin/python -m bench.fraud_batch_parts PARTS.json [bench.fraud_latency's arguments]
"""

from __future__ import annotations

import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

SLICE_S = 30
SHOWN = ("triggerExecution", "addBatch", "evaluate_and_deliver", "tog_evaluate",
         "tog_write_changes", "deliver", "publish_alerts", "commit", "delta_append")

Timings = dict[str, list[tuple[float, float]]]  # name -> (start, seconds) per call


def wrap(owner: Any, name: str, timings: Timings, label: str | None = None,
         by_method: bool = False) -> None:
    """Record every call of owner.name (its start and duration); with by_method, under
    `label` + the call's first argument after self (a method name)."""
    original: Callable[..., Any] = getattr(owner, name)

    def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.time()
        try:
            return original(self, *args, **kwargs)
        finally:
            key = f"{label}{args[1]}" if by_method else (label or name)
            timings[key].append((started, time.time() - started))

    setattr(owner, name, timed)


def instrument(timings: Timings) -> None:
    from spark_jobs.fraud.jobs.fraud_driver import FraudDriverSink
    from spark_jobs.streaming.batch_outputs import BatchOutputs

    for name in ("evaluate_and_deliver", "deliver", "commit", "publish_alerts"):
        wrap(FraudDriverSink, name, timings)
    wrap(FraudDriverSink, "_together", timings, "tog_", by_method=True)
    wrap(BatchOutputs, "append", timings, "delta_append")


def by_slice(timings: Timings, progresses: list[dict[str, Any]]) -> dict[int, dict[str, float]]:
    """Median ms of each part per SLICE_S of the run (from the first timed call)."""
    if not timings:
        return {}
    start = min(started for calls in timings.values() for started, _ in calls)
    found: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for name, calls in timings.items():
        for started, seconds in calls:
            found[int((started - start) // SLICE_S)][name].append(seconds * 1000)
    for progress in progresses:
        if not progress.get("numInputRows"):
            continue
        stamp = time.mktime(time.strptime(progress["timestamp"][:19], "%Y-%m-%dT%H:%M:%S"))
        at = int((stamp - time.timezone - start) // SLICE_S)
        for name, ms in progress.get("durationMs", {}).items():
            found[at][name].append(ms)
    return {at: {name: round(float(np.median(values)), 1) for name, values in parts.items()}
            for at, parts in sorted(found.items()) if at >= 0}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        raise SystemExit(__doc__)
    out, rest = Path(args[0]), args[1:]
    timings: Timings = defaultdict(list)
    instrument(timings)
    from bench import fraud_latency

    progresses: list[dict[str, Any]] = []
    listed = fraud_latency.progress_list

    def keep(query: Any) -> list[dict[str, Any]]:
        progresses[:] = listed(query)
        return progresses

    fraud_latency.progress_list = keep  # the run's last full list of progress reports
    code = fraud_latency.main(rest)
    slices = by_slice(timings, progresses)
    out.write_text(json.dumps({"slice_s": SLICE_S, "median_ms": slices}, indent=1))
    print(f"slice ({SLICE_S} s) " + " ".join(name[:12].rjust(12) for name in SHOWN))
    for at, parts in slices.items():
        print(f"{at:13d} " + " ".join(f"{parts.get(name, float('nan')):12.1f}" for name in SHOWN))
    print(f"parts: {out}")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
