"""The JSON gate on training_samples' traffic: how many messages take its slow path, and its CPU.

contracts/json_gate.load_json sends a message to the exact (stdlib json) number check when a
cheap scan suspects an out-of-range number. This counts, per topic, the messages the first
scan suspects and the exact checks load_json really runs (check_number_literals wrapped with
a counter, so the same script measures any version of the gate), and times load_json over
all messages (CPU seconds, best of `--repeat`). The traffic is samples_join_cpu's: the same
seeded spec and defaults.

    .venv/bin/python -m bench.json_gate_slow_path [--views N] [--repeat R] [--label L]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from bench.common import machine_info, publish_result
from spark_jobs.contracts import json_gate
from spark_jobs.samples.traffic import SamplesTrafficSpec, generate_traffic
from spark_jobs.settings import load_settings

NAME = "json_gate_slow_path"


def measure(messages: list[tuple[str, bytes]], repeat: int) -> dict[str, Any]:
    """Per topic: messages, first-scan hits, exact checks run, rejects, best CPU s of the gate."""
    exact = Counter[str]()
    topic = ""
    check = json_gate.check_number_literals

    def counted(data: bytes) -> None:
        exact[topic] += 1
        check(data)

    totals, suspects, rejected = Counter[str](), Counter[str](), Counter[str]()
    json_gate.check_number_literals = counted  # load_json looks the name up at each call
    try:
        for topic, value in messages:
            totals[topic] += 1
            suspects[topic] += json_gate._SUSPECT_NUMBER.search(value) is not None
            try:
                json_gate.load_json(value)
            except json_gate.MalformedJson:
                rejected[topic] += 1
    finally:
        json_gate.check_number_literals = check
    cpu: dict[str, list[float]] = {name: [] for name in totals}
    for _ in range(repeat):
        for name in totals:
            values = [value for t, value in messages if t == name]
            started = time.process_time()
            for value in values:
                try:  # noqa: SIM105  (contextlib.suppress would add its own cost to the timing)
                    json_gate.load_json(value)
                except json_gate.MalformedJson:
                    pass
            cpu[name].append(round(time.process_time() - started, 3))
    return {name: {"messages": totals[name], "first_scan_hits": suspects[name],
                   "exact_checks": exact[name],
                   "exact_share": round(exact[name] / totals[name], 4),
                   "rejected": rejected[name], "gate_cpu_s": cpu[name],
                   "gate_us_per_message_best": round(min(cpu[name]) / totals[name] * 1e6, 2)}
            for name in sorted(totals)}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"bench.{NAME}", description=__doc__.split("\n")[0])
    parser.add_argument("--views", type=int, default=120_000, help="default 120000")
    parser.add_argument("--malformed-share", type=float, default=0.0,
                        help="share of malformed messages in the traffic (default 0)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs, best kept")
    parser.add_argument("--label", default="", help="a name for this code state, in the JSON")
    parser.add_argument("--out", default=None, help="result JSON (default bench/results/...)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    samples = load_settings(environ={}).samples
    spec = SamplesTrafficSpec(window_ms=samples.window_ms, max_disorder_ms=60_000,
                              malformed_share=args.malformed_share)
    messages = [(record.topic, record.value) for record in generate_traffic(spec, args.views)]
    result: dict[str, Any] = {"benchmark": NAME, "machine": machine_info(),
                              "params": vars(args), "result": measure(messages, args.repeat)}
    publish_result(NAME, args.out, result, lambda r: [
        f"{NAME} ({args.label or 'unlabelled'}) {name}: {t['messages']:,} messages, first scan "
        f"{t['first_scan_hits']:,}, exact checks {t['exact_checks']:,} ({t['exact_share']:.1%}), "
        f"rejected {t['rejected']:,}; gate {t['gate_us_per_message_best']} µs/message "
        f"(CPU s {t['gate_cpu_s']})" for name, t in r["result"].items()])


if __name__ == "__main__":
    main()
