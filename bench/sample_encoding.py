"""Training samples on the wire: bytes per sample for JSON and Avro under each Kafka codec.

The same N samples (built from `spark_jobs.samples.traffic` views: the spec's shape, the
view's context as a JSON string, labels drawn with the generator's engagement rates,
window_ms for Avro v2) are produced to a fresh broker (bench.common.sandbox) once per
(encoding, codec, micro-batch size), each run with a new producer configured as the job's:
the project defaults (idempotent, acks=all, murmur2 keyed by user_id, topic with
kafka.partitions partitions), linger.ms 10, default batch.size, and a flush after every
`chunk` samples, because the job produces one micro-batch's samples and then flushes (no
Kafka batch spans two micro-batches). JSON is orjson of the sample; Avro is the Confluent
wire format of `spark_jobs.samples.encoding.sample_avro` (5-byte header included).

What is measured: librdkafka's own counter of bytes written to broker sockets (statistics
`tx_bytes`), from just before the first sample to after the last acknowledgement, divided
by N. That is what crossed the network: compressed record batches with their per-record
framing (key, lengths, timestamp deltas) and the Produce request headers; nothing else is
sent meanwhile (the producer has connected and fetched metadata before the baseline). The
broker's stored log size would be the other honest figure, but the embedded broker keeps
its log in memory; the sum of the record batch sizes librdkafka built (`batchsize`) is
reported beside it as a cross-check (wire = batches + request framing). Encode CPU time is
the best of three timed passes over all samples, one thread.

    .venv/bin/python -m bench.sample_encoding [--samples 20000] [--chunks 100,1000,20000]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from bench.common import bench_settings, machine_info, publish_result, sandbox
from spark_jobs.samples.encoding.sample_avro import DEFAULT_SIGNALS, SampleDecoder, SampleEncoder
from spark_jobs.samples.traffic import SamplesTrafficSpec, generate_views
from spark_jobs.settings import Settings

NAME = "sample_encoding"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
ENCODINGS = ("json", "avro")
LINGER_MS = 10
STATS_MS = 100
WINDOW_MS = 600_000  # samples.window default
VIEW_KEYS = ("view_id", "user_id", "post_id", "ts")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"bench.{NAME}", description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=20_000, help="samples per run")
    parser.add_argument("--chunks", default="100,1000,20000",
                        help="samples per micro-batch (flush after each), comma-separated; "
                             "the first is the headline (default 100,1000,20000)")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--out", default=None, help="result JSON (default bench/results/...)")
    return parser.parse_args(argv)


# ---------------------------------------------------------------- samples


def label_rates(spec: SamplesTrafficSpec) -> dict[str, float]:
    """Chance of each label being 1, as the generator's engagements make them."""
    played = spec.play_rate
    return {"like": played * spec.like_rate + spec.skip_rate * spec.like_rate / 20,
            "share": played * spec.share_rate, "comment": played * spec.comment_rate,
            "favorite": played * spec.favorite_rate, "play": played, "skip": spec.skip_rate}


def build_samples(count: int, seed: int) -> list[dict[str, Any]]:
    """Samples of the spec's shape from generated views (a few minutes of a feed at 100
    views/s), labels drawn at realistic rates."""
    spec = SamplesTrafficSpec(seed=seed)
    rates = label_rates(spec)
    rng = random.Random(seed)
    samples = []
    # in view time order, as the job emits them: a session's views are not side by side
    for view in sorted(generate_views(spec, count), key=lambda v: v["ts"]):
        context = {k: v for k, v in view.items() if k not in VIEW_KEYS}
        samples.append({
            "sample_id": view["view_id"], "view_id": view["view_id"],
            "user_id": view["user_id"], "post_id": view["post_id"], "ts": view["ts"],
            "context": json.dumps(context, separators=(",", ":"), ensure_ascii=False),
            "labels": {s: int(rng.random() < rates[s]) for s in DEFAULT_SIGNALS},
        })
    return samples


def encoders() -> dict[str, Callable[[dict[str, Any]], bytes]]:
    avro = SampleEncoder(DEFAULT_SIGNALS, defaults={"window_ms": WINDOW_MS})
    return {"json": orjson.dumps, "avro": avro.encode}


def encode_cost(samples: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Microseconds per sample to encode (best of 3), plus stdlib json and Avro decoding."""
    avro = SampleEncoder(DEFAULT_SIGNALS, defaults={"window_ms": WINDOW_MS})
    avro_values = [avro.encode(s) for s in samples]
    decoder = SampleDecoder()

    def stdlib(sample: dict[str, Any]) -> bytes:
        return json.dumps(sample, separators=(",", ":"), ensure_ascii=False).encode()

    work: dict[str, tuple[Callable[[Any], Any], list[Any]]] = {
        "json_orjson": (orjson.dumps, samples), "json_stdlib": (stdlib, samples),
        "avro": (avro.encode, samples), "avro_decode": (decoder.decode, avro_values),
        "json_decode_orjson": (orjson.loads, [orjson.dumps(s) for s in samples]),
    }
    found = {}
    for name, (function, items) in work.items():
        best = min(_timed(function, items) for _ in range(3))
        found[name] = {"us_per_sample": round(best * 1e6 / len(items), 2)}
    return found


def _timed(function: Callable[[Any], Any], items: list[Any]) -> float:
    started = time.process_time()
    for item in items:
        function(item)
    return time.process_time() - started


# ---------------------------------------------------------------- one run against the broker


class _Stats:
    """librdkafka statistics: the latest report and the batch bytes summed over windows."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.latest: dict[str, Any] = {}
        self.batch_bytes = 0
        self.batches = 0
        self.reports = 0

    def __call__(self, text: str) -> None:
        report = json.loads(text)
        self.latest = report
        self.reports += 1
        topic = report.get("topics", {}).get(self.topic, {})
        self.batch_bytes += topic.get("batchsize", {}).get("sum", 0)
        self.batches += topic.get("batchsize", {}).get("cnt", 0)

    def settle(self, producer: Any) -> None:
        """Serve reports until one covers everything sent so far."""
        seen = self.reports
        deadline = time.monotonic() + 5.0
        while (self.reports < seen + 2) and time.monotonic() < deadline:
            producer.poll(STATS_MS / 1000)


def wire_run(settings: Settings, topic: str, codec: str, keys: list[str],
             values: list[bytes], chunk: int) -> dict[str, Any]:
    """Produce `values` in micro-batches of `chunk` (flush after each) and measure."""
    from spark_jobs.streaming.kafka.producer import make_producer
    from spark_jobs.streaming.kafka.topic_admin import ensure_topics

    ensure_topics(settings.kafka, [topic], settings.kafka.partitions)
    stats = _Stats(topic)
    producer = make_producer(settings.kafka, **{
        "compression.type": codec, "linger.ms": LINGER_MS,
        "statistics.interval.ms": STATS_MS, "stats_cb": stats})
    failures: list[Any] = []

    def on_delivery(error: Any, _message: Any) -> None:
        if error is not None:
            failures.append(error)

    producer.list_topics(topic, timeout=10)
    stats.settle(producer)
    before = stats.latest["tx_bytes"]
    cpu, wall = time.process_time(), time.perf_counter()
    for first in range(0, len(values), chunk):
        for key, value in zip(keys[first:first + chunk], values[first:first + chunk],
                              strict=True):
            while True:
                try:
                    producer.produce(topic, value, key, on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.01)
        if producer.flush(60):
            raise RuntimeError(f"{topic}: messages still queued after 60 s")
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    stats.settle(producer)
    if failures:
        raise RuntimeError(f"{topic}: {len(failures)} deliveries failed: {failures[0]}")
    sent = stats.latest["tx_bytes"] - before
    count = len(values)
    delivered = stats.latest["txmsgs"]
    if delivered != count:
        raise RuntimeError(f"{topic}: librdkafka counted {delivered} messages, not {count}")
    return {
        "wire_bytes": sent,
        "wire_bytes_per_sample": round(sent / count, 2),
        "batch_bytes_per_sample": round(stats.batch_bytes / count, 2),
        "batches": stats.batches,
        "value_bytes_per_sample": round(sum(map(len, values)) / count, 2),
        "produce_cpu_us_per_sample": round(cpu * 1e6 / count, 2),
        "produce_s": round(wall, 3),
    }


def measure(settings: Settings, samples: list[dict[str, Any]], chunks: list[int]
            ) -> list[dict[str, Any]]:
    keys = [str(s["user_id"]) for s in samples]
    runs = []
    for name, encode in encoders().items():
        values = [encode(s) for s in samples]
        for chunk in chunks:
            for codec in CODECS:
                topic = f"samples-{name}-{codec}-{chunk}"
                print(f"  {topic}", file=sys.stderr, flush=True)
                run = wire_run(settings, topic, codec, keys, values, chunk)
                runs.append({"encoding": name, "codec": codec, "chunk": chunk, **run})
    for chunk in chunks:
        group = [r for r in runs if r["chunk"] == chunk]
        plain = next(r for r in group if r["encoding"] == "json" and r["codec"] == "none")
        for run in group:
            run["reduction_vs_json_none"] = round(
                1 - run["wire_bytes"] / plain["wire_bytes"], 4)
    return runs


def avro_round_trip(samples: list[dict[str, Any]]) -> int:
    """Every sample decodes back to itself (plus window_ms): the sizes are of real samples."""
    encoder = SampleEncoder(DEFAULT_SIGNALS, defaults={"window_ms": WINDOW_MS})
    decoder = SampleDecoder()
    for sample in samples:
        if decoder.decode(encoder.encode(sample)) != {**sample, "window_ms": WINDOW_MS}:
            raise AssertionError(f"sample {sample['sample_id']} did not round-trip")
    return len(samples)


def best(runs: list[dict[str, Any]], chunk: int) -> dict[str, Any]:
    return min((r for r in runs if r["chunk"] == chunk), key=lambda r: r["wire_bytes"])


# ---------------------------------------------------------------- output


def summary_lines(result: dict[str, Any]) -> list[str]:
    runs, chunks = result["runs"], result["params"]["chunks"]
    lines = [f"{NAME}: {result['params']['samples']:,} samples, bytes per sample on the wire "
             f"(librdkafka tx_bytes / N; reduction vs JSON uncompressed), linger.ms "
             f"{LINGER_MS}, flush every <chunk> samples"]
    header = f"  {'encoding':<6} {'codec':<7}" + "".join(
        f" | chunk {c:>6}: B/sample  red." for c in chunks)
    lines.append(header)
    for encoding in ENCODINGS:
        for codec in CODECS:
            cells = []
            for chunk in chunks:
                run = next(r for r in runs if (r["encoding"], r["codec"], r["chunk"])
                           == (encoding, codec, chunk))
                cells.append(f" | {run['wire_bytes_per_sample']:>22.1f} "
                             f"{run['reduction_vs_json_none'] * 100:>4.0f}%")
            lines.append(f"  {encoding:<6} {codec:<7}" + "".join(cells))
    for chunk in chunks:
        top = best(runs, chunk)
        lines.append(f"  best at chunk {chunk}: {top['encoding']}+{top['codec']} "
                     f"{top['wire_bytes_per_sample']} B/sample, "
                     f"{top['reduction_vs_json_none'] * 100:.1f} % less than JSON uncompressed")
    cost = result["encode_cost"]
    lines.append("  CPU us/sample: " + ", ".join(
        f"{name} {value['us_per_sample']}" for name, value in cost.items()))
    return lines


def run_benchmark(samples_n: int = 20_000, chunks: Sequence[int] = (100, 1000, 20_000),
                  seed: int = 11, out: str | None = None) -> dict[str, Any]:
    """Measure, write bench/results/sample_encoding-<date>.json, print the table; returns the
    result, whose `reduction_best_codec` is the best codec's saving vs JSON uncompressed at
    the first chunk size."""
    chunks = list(chunks)
    machine = machine_info()
    samples = build_samples(samples_n, seed)
    checked = avro_round_trip(samples)
    cost = encode_cost(samples)
    with sandbox(NAME) as box:
        settings = bench_settings(box, {})
        runs = measure(settings, samples, chunks)
    headline = best(runs, chunks[0])
    result = {
        "benchmark": NAME,
        "machine": machine,
        "params": {"samples": samples_n, "chunks": chunks, "seed": seed,
                   "linger_ms": LINGER_MS, "partitions": settings.kafka.partitions,
                   "signals": list(DEFAULT_SIGNALS), "window_ms": WINDOW_MS,
                   "metric": "librdkafka tx_bytes delta / samples"},
        "round_trip_checked": checked,
        "encode_cost": cost,
        "runs": runs,
        "best": {str(c): {k: best(runs, c)[k] for k in ("encoding", "codec",
                                                        "wire_bytes_per_sample",
                                                        "reduction_vs_json_none")}
                 for c in chunks},
        "reduction_best_codec": headline["reduction_vs_json_none"],
    }
    publish_result(NAME, out, result, summary_lines)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    chunks = [int(c) for c in args.chunks.split(",") if c.strip()]
    run_benchmark(args.samples, chunks, args.seed, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
