"""How fast the dashboard answers on a production-sized `experiment_metrics` table.

Production durations (3-day periods, 15-minute windows: 289 planned looks), N experiments of
2 groups x 4 event types with a full period of windows each. Measured: judging every
experiment from the table (cold, i.e. the first request after a new micro-batch), a poll when
nothing changed (one Delta version lookup), and the HTTP API's latency for the list and for
one experiment's detail, with their JSON sizes; then the list's first answer after a new
version of `experiment_metrics_provisional` (every experiment judged live as well: what a
provisional row costs before the page can show it).

    .venv/bin/python -m bench.dashboard_latency [--experiments 20] [--requests 50]
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from typing import Any

from bench.common import machine_info, percentiles, publish_result
from spark_jobs.results.dashboard.results import ResultsCache, load_results
from spark_jobs.results.dashboard.server import DashboardServer
from spark_jobs.results.synthetic_metrics import (
    KNOWN_EFFECTS,
    START_MS,
    write_metrics,
    write_provisional,
)
from spark_jobs.settings import load_settings

NAME = "dashboard_latency"
EVENTS = {"impression": (0.6, 0.6), "click": (0.2, 0.21), "save": (0.1, 0.1),
          "search": (0.3, 0.3)}


def timed_ms(call: Any) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def fetch(url: str) -> int:
    with urllib.request.urlopen(url, timeout=30) as response:
        return len(response.read())


def run(experiments: int, requests: int, root: str) -> dict[str, Any]:
    settings = load_settings(environ={}, overrides={
        "lake": {"root": root}, "experiments": {"period": "3d", "window": "15m"},
    })
    windows = 288
    specs = [dataclasses.replace(KNOWN_EFFECTS[i % len(KNOWN_EFFECTS)], name=f"exp_{i:03d}",
                                 rates=EVENTS, windows=windows, users_per_window=(400, 400))
             for i in range(experiments)]
    started = time.perf_counter()
    write_metrics(settings, specs, windows=windows - 1)
    rows = experiments * 2 * len(EVENTS) * (windows - 1)
    print(f"wrote {rows} rows in {time.perf_counter() - started:.1f} s", flush=True)

    load_results(settings)  # imports (scipy, plotly paths) out of the way
    cold = [timed_ms(lambda: load_results(settings)) for _ in range(5)]
    cache = ResultsCache(settings)
    cache.get()
    polls = [timed_ms(cache.get) for _ in range(20)]
    with DashboardServer(settings, port=0) as server:
        fetch(server.url + "api/experiments")
        list_ms, detail_ms = [], []
        list_bytes = detail_bytes = 0
        for _ in range(requests):
            started = time.perf_counter()
            list_bytes = fetch(server.url + "api/experiments")
            list_ms.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            detail_bytes = fetch(server.url + "api/experiments/exp_000")
            detail_ms.append((time.perf_counter() - started) * 1000)
        new_window = timed_ms(lambda: (write_metrics(settings, specs[:1], windows=windows,
                                                     ramps=False),
                                       fetch(server.url + "api/experiments")))
        live_ms = []
        for extra in range(3):  # each time a new provisional version, every experiment live
            write_provisional(settings, specs, seed=1 + extra, windows=windows,
                              watermark=START_MS + (windows - 1) * settings.experiments.window_ms)
            live_ms.append(timed_ms(lambda: fetch(server.url + "api/experiments")))
    return {
        "experiments": experiments, "rows": rows, "windows_per_period": windows,
        "judge_all_ms": percentiles(cold, (50, 95)),
        "unchanged_poll_ms": percentiles(polls, (50, 95)),
        "api_list_ms": percentiles(list_ms, (50, 95)), "api_list_bytes": list_bytes,
        "api_detail_ms": percentiles(detail_ms, (50, 95)), "api_detail_bytes": detail_bytes,
        "new_window_write_and_list_ms": round(new_window, 1),
        "new_provisional_list_ms": percentiles(live_ms, (50, 95)),
    }


def summary(result: dict[str, Any]) -> list[str]:
    return [
        f"{result['experiments']} experiments, {result['rows']} rows "
        f"({result['windows_per_period']} windows per period)",
        f"judge every experiment: p50 {result['judge_all_ms']['p50']} ms",
        f"poll with no new version: p50 {result['unchanged_poll_ms']['p50']} ms",
        f"GET /api/experiments: p50 {result['api_list_ms']['p50']} ms, "
        f"{result['api_list_bytes']} B",
        f"GET /api/experiments/<hash>: p50 {result['api_detail_ms']['p50']} ms, "
        f"{result['api_detail_bytes']} B",
        f"first list after a new provisional version: p50 "
        f"{result['new_provisional_list_ms']['p50']} ms",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"bench.{NAME}", description=__doc__.split("\n")[0])
    parser.add_argument("--experiments", type=int, default=20)
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--out", default=None, help="result JSON (default bench/results/...)")
    args = parser.parse_args(argv)
    machine = machine_info()
    with tempfile.TemporaryDirectory(prefix="tideline-bench-dashboard-") as root:
        result = run(args.experiments, args.requests, root)
    publish_result(NAME, args.out, {"machine": machine, **result}, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
