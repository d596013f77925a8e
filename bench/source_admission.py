"""How a limited, available-now read of a small topic far behind a big one is planned.

fraud_rules' shape: ten records in a one-partition topic (the rules), then --records in a
two-partition topic (the transactions) later in event time, read together with a per-trigger
limit. Plans only (no Spark): the source's `latestOffset` is called until the run's end, with
the limit's regrant (streaming/kafka/limit_regrant.py) and without it (the plan as aligned),
alternately. Reports each plan's records and planning time; the number of plans is the
number of micro-batches the job would run.

    .venv/bin/python -m bench.source_admission [--records 60000] [--limit 20000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from typing import Any

from bench.common import machine_info, publish_result

NAME = "source_admission"
BASE_MS = 1_767_225_600_000
SMALL, BIG = "admission_small", "admission_big"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"bench.{NAME}", description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=60_000, help="records of the big topic")
    parser.add_argument("--limit", type=int, default=20_000, help="maxRecordsPerTrigger")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each variant")
    parser.add_argument("--out", default=None, help="result JSON (default bench/results/...)")
    return parser.parse_args(argv)


def _events(first_ms: int, count: int) -> list[str]:
    return [json.dumps({"user_id": i, "event_type": "click", "ts": first_ms + i})
            for i in range(count)]


def plans(bootstrap: str, limit: int, regrant: bool) -> list[dict[str, int]]:
    """Every plan of one available-now run: records read and planning milliseconds."""
    from pyspark.sql.streaming.datasource import ReadMaxRows

    from spark_jobs.streaming.kafka import limit_regrant
    from spark_jobs.streaming.kafka import stream_reader as reader_module
    from spark_jobs.streaming.kafka.options import SourceOptions

    def as_aligned(*args: Any) -> dict[str, int]:
        return dict(args[3])  # the aligned plan, not grown

    reader_module.fill_limit = limit_regrant.fill_limit if regrant else as_aligned
    options = SourceOptions.parse({"bootstrap": bootstrap, "topic": f"{SMALL},{BIG}",
                                   "record": "events"})
    reader = reader_module.TidelineKafkaStreamReader(options)
    found = []
    try:
        begin = reader.initialOffset()
        reader.prepareForTriggerAvailableNow()
        while True:
            started = time.perf_counter()
            end = reader.latestOffset(begin, ReadMaxRows(limit))
            elapsed_ms = round((time.perf_counter() - started) * 1000)
            if end == begin:
                return found
            found.append({"records": sum(int(end[k]) - int(begin.get(k, 0)) for k in end),
                          "ms": elapsed_ms})
            begin = end
    finally:
        reader.stop()
        reader_module.fill_limit = limit_regrant.fill_limit


def summary_lines(result: dict[str, Any]) -> list[str]:
    lines = [f"{NAME}: 10 records, then {result['params']['records']:,} later, limit "
             f"{result['params']['limit']:,}"]
    for run in result["runs"]:
        lines.append(f"  {run['variant']}: {len(run['plans'])} plans, planning "
                     f"{sum(p['ms'] for p in run['plans']):,} ms: "
                     + ", ".join(f"{p['records']}/{p['ms']}" for p in run["plans"]))
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    from spark_jobs.local.broker import EmbeddedBroker
    from spark_jobs.settings import KafkaSettings
    from spark_jobs.streaming.kafka.producer import make_producer, produce_all
    from spark_jobs.streaming.kafka.topic_admin import ensure_topics

    args = parse_args(argv)
    machine = machine_info()
    runs = []
    with EmbeddedBroker(port=0) as broker:
        kafka = KafkaSettings(bootstrap=broker.bootstrap)
        ensure_topics(kafka, [SMALL], 1)
        ensure_topics(kafka, [BIG], 2)
        producer = make_producer(kafka)
        produce_all(producer, SMALL, [None] * 10, _events(BASE_MS, 10),
                    [BASE_MS + i for i in range(10)])
        later = BASE_MS + 1_000
        produce_all(producer, BIG, [str(i) for i in range(args.records)],
                    _events(later, args.records), [later + i for i in range(args.records)])
        for _ in range(args.rounds):
            for variant in ("regrant", "aligned only"):
                runs.append({"variant": variant,
                             "plans": plans(broker.bootstrap, args.limit, variant == "regrant")})
    result = {"benchmark": NAME, "machine": machine,
              "params": {"records": args.records, "limit": args.limit, "rounds": args.rounds},
              "runs": runs}
    publish_result(NAME, args.out, result, summary_lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
