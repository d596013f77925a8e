"""training_samples' join processor alone, without Spark: CPU seconds and an output digest.

The job's end-to-end figures (bench/samples_throughput.py) move with the load of a shared
box by several times; the per-user join, most of a batch's time, is pure Python and can be
measured apart in a minute. The seeded traffic of samples_throughput (same defaults) is cut
into batches of `--limit` records in Kafka order, the views parsed as the de-duplication
hands them over (its PARSED columns), and every batch's rows go, bucket by bucket, through
SampleJoinProcessor exactly as applyInPandasWithState calls it (frames in, one blob and one
timeout per bucket, a bucket whose timeout passed called without rows), at the watermark
the job would have (`samples.lateness` behind the largest ts of the batches before), then
two empty batches at the end close every window. Reported: the processor's CPU seconds
(process time, steadier than wall time on a loaded box) and a digest of all its output rows
(sorted), which must not change when the join is only made faster.

    .venv/bin/python -m bench.samples_join_cpu [--views N] [--limit L] [--repeat R]
"""

from __future__ import annotations

import argparse
import hashlib
import time
import zlib
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import orjson
import pandas as pd

from bench.common import machine_info, publish_result
from spark_jobs.contracts.topics import TOPIC_VIEWS
from spark_jobs.samples.core.joiner import JoinParameters
from spark_jobs.samples.core.records import Source, View, parse_view
from spark_jobs.samples.processors.dedup_processor import PARSED
from spark_jobs.samples.processors.join_processor import INPUT_FIELDS, SampleJoinProcessor
from spark_jobs.samples.traffic import SamplesTrafficSpec, generate_traffic
from spark_jobs.settings import load_settings
from spark_jobs.streaming.bucketed.local_state import LocalGroupState
from spark_jobs.streaming.event_time import FUTURE_COLUMN

NAME = "samples_join_cpu"
BUCKETS = 64  # jobs.state_buckets' default
PARTITIONS = 2
_INT32 = ("kafka_partition",)


def input_rows(views: int, seed_spec: SamplesTrafficSpec) -> list[dict[str, Any]]:
    """The generated traffic as the join's input rows, in Kafka order (partition by key)."""
    offsets: dict[tuple[str, int], int] = defaultdict(int)
    rows = []
    for record in generate_traffic(seed_spec, views):
        partition = zlib.crc32((record.key or "").encode()) % PARTITIONS
        offset = offsets[(record.topic, partition)]
        offsets[(record.topic, partition)] += 1
        decoded = orjson.loads(record.value)
        row = dict.fromkeys((*INPUT_FIELDS, FUTURE_COLUMN))
        row.update(user_id=decoded.get("user_id"), kafka_topic=record.topic,
                   kafka_partition=partition, kafka_offset=offset,
                   kafka_timestamp=record.timestamp, kafka_key=record.key, value=record.value)
        if record.topic == TOPIC_VIEWS:
            view = parse_view(record.value, Source(record.topic, partition, offset,
                                                   record.timestamp, record.key))
            if isinstance(view, View):
                row.update(zip(PARSED, (view.view_id, view.user_id, view.post_id, view.ts,
                                        view.context), strict=True))
        row["_ts"] = decoded.get("ts")
        rows.append(row)
    return rows


def frame_of(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows as Spark's Arrow conversion hands them over (nullable integer columns)."""
    frame = pd.DataFrame([{k: v for k, v in row.items() if k != "_ts"} for row in rows])
    for name in frame.columns:
        if name != "user_id" and frame[name].dtype == object and all(
                v is None or isinstance(v, int) for v in frame[name]):
            frame[name] = pd.array(frame[name].tolist(), dtype="Int64")
    frame["user_id"] = pd.array(frame["user_id"].tolist(), dtype="Int64")
    for name in _INT32:
        frame[name] = pd.array(frame[name].tolist(), dtype="Int32")
    return frame


def run_once(rows: list[dict[str, Any]], limit: int, params: JoinParameters,
             lateness_ms: int) -> tuple[float, str, int]:
    """CPU seconds of the processor over every batch, the digest of its output, row count."""
    processor = SampleJoinProcessor(params)
    processor.buckets = BUCKETS
    states: dict[int, LocalGroupState] = defaultdict(LocalGroupState)
    watermark = max_ts = 0
    cpu = 0.0
    frames_out: list[pd.DataFrame] = []
    for start in [*range(0, len(rows), limit), len(rows), len(rows)]:
        batch = rows[start:start + limit]
        by_bucket: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for row in batch:
            by_bucket[hash(row["user_id"]) % BUCKETS].append(row)
        frames = {b: frame_of(group) for b, group in by_bucket.items()}
        started = time.process_time()
        for b in sorted({*frames, *states}):
            state = states[b]
            state.watermark, state.hasTimedOut = watermark, b not in frames
            if state.hasTimedOut and (state.timeout is None or state.timeout >= watermark):
                continue  # Spark times a group out once the watermark is past its timeout
            frames_out.extend(processor((b,), iter([frames[b]] if b in frames else []), state))
        cpu += time.process_time() - started
        max_ts = max([max_ts, *(r["_ts"] for r in batch if r["_ts"] is not None)])
        watermark = max(watermark, max_ts - lateness_ms)
    out = [repr(r) for frame in frames_out
           for r in frame.astype(object).where(frame.notna(), None).itertuples(index=False)]
    digest = hashlib.sha256("\n".join(sorted(out)).encode()).hexdigest()
    return cpu, digest, len(out)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"bench.{NAME}", description=__doc__.split("\n")[0])
    parser.add_argument("--views", type=int, default=120_000, help="default 120000")
    parser.add_argument("--limit", type=int, default=100_000,
                        help="records per batch (jobs.max_records_per_trigger), default 100000")
    parser.add_argument("--repeat", type=int, default=3, help="runs, the best kept (default 3)")
    parser.add_argument("--label", default="", help="a name for this code state, in the JSON")
    parser.add_argument("--out", default=None, help="result JSON (default bench/results/...)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    samples = load_settings(environ={}).samples
    params = JoinParameters(samples.window_ms, samples.signals)
    spec = SamplesTrafficSpec(window_ms=samples.window_ms, max_disorder_ms=60_000)
    result: dict[str, Any] = {"benchmark": NAME, "machine": machine_info(),
                              "params": {**vars(args), "buckets": BUCKETS}}
    rows = input_rows(args.views, spec)
    runs = [run_once(rows, args.limit, params, samples.lateness_ms) for _ in range(args.repeat)]
    cpus = [cpu for cpu, _, _ in runs]
    result["result"] = {
        "records": len(rows), "cpu_s": [round(c, 2) for c in cpus],
        "records_per_cpu_s_best": round(len(rows) / min(cpus)),
        "output_rows": runs[0][2], "output_digest": runs[0][1],
        "digests_agree": len({digest for _, digest, _ in runs}) == 1,
    }
    publish_result(NAME, args.out, result, lambda r: [
        f"{NAME} ({args.label or 'unlabelled'}): {r['result']['records']:,} records, CPU s "
        f"{r['result']['cpu_s']} -> best {r['result']['records_per_cpu_s_best']:,} records "
        f"per CPU second; {r['result']['output_rows']:,} output rows, digest "
        f"{r['result']['output_digest'][:16]}; load {r['machine']['load_average_at_start']}"])


if __name__ == "__main__":
    main()
