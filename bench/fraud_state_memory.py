"""Memory the fraud engine's state holds per transaction, in the process and pickled.

The engine (ten benchmark rules, a LoggedStore as both job modes run it) takes
`--transactions` of the benchmark traffic at `--event-rate`, in batches of `--batch` with the
change log taken after each, and an infinitely old watermark, so that no entry expires: the
RSS it grew by, divided by the transactions, is what each transaction costs while it is held.
At steady state the state holds `fraud.lateness` + a rule's window + `fraud.late_retention`
of traffic per rule, which gives the memory a rate needs. As in a live engine after its
first clean-up, the clean-up's due index is built and kept (nothing is due). With
`--every N`, the RSS and the window count are also read every N transactions: the marginal
bytes per transaction once the keys repeat (a short run is dominated by new keys, each
starting windows).

    .venv/bin/python -m bench.fraud_state_memory [--transactions 300000] [--event-rate 10000]
        [--every 250000]
"""

from __future__ import annotations

import argparse
import gc
import os
from collections.abc import Sequence
from itertools import pairwise

from bench.common import machine_info, publish_result
from bench.fraud_engine_cpu import benchmark_traffic
from spark_jobs.fraud.core.changelog import LoggedStore
from spark_jobs.fraud.core.engine import FraudEngine
from spark_jobs.fraud.traffic import benchmark_rules

NAME = "fraud_state_memory"


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"bench.{NAME}", description=__doc__.split("\n")[0])
    parser.add_argument("--transactions", type=int, default=300_000)
    parser.add_argument("--event-rate", type=float, default=10_000.0)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--every", type=int, default=0,
                        help="also read the RSS every this many transactions (0: only at the end)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    machine = machine_info()
    texts, times = benchmark_traffic(args.transactions, args.event_rate)
    gc.collect()
    before = resident_bytes()
    store = LoggedStore()
    engine = FraudEngine(store)
    for text in benchmark_rules():
        engine.on_rule(text, times[0] - 1000)
    # a live engine's first clean-up builds the due index, which every new window then enters
    engine.cleanup(-(2**62))
    checkpoints: list[dict[str, int]] = []
    for first in range(0, len(texts), args.batch):
        for text in texts[first:first + args.batch]:
            engine.on_transaction(text, -(2**62), 0)
        store.take_changes()
        done = first + args.batch
        if args.every and done % args.every == 0 and done < len(texts):
            gc.collect()
            checkpoints.append({"transactions": done, "rss_grown_bytes": resident_bytes() - before,
                                "windows": store.window_count()})
    gc.collect()
    grown = resident_bytes() - before
    snapshot = len(store.snapshot())
    result = {"benchmark": NAME, "machine": machine,
              "params": {"transactions": args.transactions, "event_rate": args.event_rate},
              "rss_grown_bytes": grown, "rss_bytes_per_transaction": round(grown / len(texts)),
              "snapshot_bytes": snapshot,
              "snapshot_bytes_per_transaction": round(snapshot / len(texts)),
              "windows": store.window_count(),
              "checkpoints": checkpoints}
    checkpoints.append({"transactions": len(texts), "rss_grown_bytes": grown,
                        "windows": store.window_count()})
    marginal = [
        {"transactions": b["transactions"],
         "rss_bytes_per_transaction": round((b["rss_grown_bytes"] - a["rss_grown_bytes"])
                                            / (b["transactions"] - a["transactions"])),
         "new_windows_per_transaction": round((b["windows"] - a["windows"])
                                              / (b["transactions"] - a["transactions"]), 2)}
        for a, b in pairwise(checkpoints)]
    result["marginal"] = marginal

    def summary(res: dict[str, object]) -> list[str]:
        return [f"state held: {res['rss_bytes_per_transaction']} B of RSS and "
                f"{res['snapshot_bytes_per_transaction']} B pickled per transaction "
                f"({res['windows']:,} windows)"] + [
            f"  up to {m['transactions']:,}: {m['rss_bytes_per_transaction']} B of RSS per "
            f"transaction more, {m['new_windows_per_transaction']} new windows each"
            for m in res["marginal"]]

    publish_result(NAME, args.out, result, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
