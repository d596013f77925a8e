"""How the embedded broker (Tansu, memory storage) slows down with record batches per partition.

One partition receives single-record batches (linger 0, a flush per message, as a paced
producer with a short linger or a micro-batch sink writing one batch per trigger does) up to
--batches; every --every batches it measures, on the loaded partition: the produce acks of
the last block; a raw Fetch of the tail (`kafka_wire`: the stored batches are counted
exactly, so "one batch per message" is checked, not assumed); how many tail fetches are
answered with the batch at fetch max waits of 5 to 500 ms (Tansu answers empty, with no
error, when finding the offset takes longer than the max wait; the jobs' consumers wait 5
and 10 ms); how long a tailing confluent-kafka consumer (fetch.wait.max.ms 5, as the jobs'
tail index) and a new consumer assigned at the last record take to receive a record; and a
tail fetch of a second partition holding one batch, to tell a per-partition cost from a
broker-wide one. The run ends at --batches, or when a measurement takes longer than
--give-up seconds, or when even 500 ms fetches are no longer answered.

    .venv/bin/python -m bench.tansu_batches [--batches N] [--every K]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

from bench.common import machine_info, percentiles, publish_result
from bench.kafka_wire import BatchCounter, WireClient

TOPIC = "tansu_batches"
LOADED, QUIET = 0, 1
MAX_WAITS_MS = (5, 10, 50, 100, 500)  # 5 and 10: what the jobs' consumers use
TRIES = 5
PAYLOAD = b'{"userId":"u-1234","eventType":"view","ts":1764000000000,"value":1.0}'


def _producer(bootstrap: str) -> Any:
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                     "compression.type": "lz4", "linger.ms": 0, "log_level": 0})


def _tail_consumer(bootstrap: str) -> Any:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tansu-batches",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 5, "log_level": 0})
    consumer.assign([TopicPartition(TOPIC, LOADED, OFFSET_BEGINNING)])
    return consumer


def _timed_fetch(client: WireClient, partition: int, offset: int) -> float:
    started = time.perf_counter()
    client.fetch(TOPIC, {partition: offset})
    return (time.perf_counter() - started) * 1000


def _served_by_max_wait(client: WireClient, offset: int) -> dict[str, str]:
    """Per fetch max wait: how many of TRIES tail fetches returned the batch (Tansu answers
    empty, without an error, when finding the offset takes longer than the max wait)."""
    served = {}
    for wait in MAX_WAITS_MS:
        got = 0
        for _ in range(TRIES):
            found = client.fetch(TOPIC, {LOADED: offset}, max_wait_ms=wait).get(LOADED)
            got += bool(found and found.batches)
        served[str(wait)] = f"{got}/{TRIES}"
    return served


def _fresh_consumer_latency(bootstrap: str, offset: int, give_up_s: float) -> float:
    """Milliseconds until a new consumer assigned at `offset` (the last record) receives it."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tansu-batches-fresh",
                         "enable.auto.commit": False, "log_level": 0})
    consumer.assign([TopicPartition(TOPIC, LOADED, offset)])
    started = time.perf_counter()
    try:
        while time.perf_counter() - started < give_up_s:
            message = consumer.poll(0.05)
            if message is not None and message.error() is None:
                return (time.perf_counter() - started) * 1000
        return float("inf")
    finally:
        consumer.close()


def _consume_latency(producer: Any, consumer: Any, marker: bytes, give_up_s: float) -> float:
    """Milliseconds from sending a marked record until the tailing consumer has it.

    The consumer reads from the beginning and librdkafka keeps fetching in the background,
    so draining its queue first leaves it at the tail (a re-assign would stall on Tansu)."""
    while consumer.poll(0) is not None:
        pass
    started = time.perf_counter()
    producer.produce(TOPIC, value=marker, partition=LOADED)
    producer.flush(give_up_s)
    while time.perf_counter() - started < give_up_s:
        message = consumer.poll(0.05)
        if message is not None and message.error() is None and message.value() == marker:
            return (time.perf_counter() - started) * 1000
    return float("inf")


def measure(bootstrap: str, total: int, every: int, give_up_s: float) -> dict[str, Any]:
    from spark_jobs.settings import KafkaSettings
    from spark_jobs.streaming.kafka.topic_admin import ensure_topics

    ensure_topics(KafkaSettings(bootstrap=bootstrap), [TOPIC], partitions=2)
    producer = _producer(bootstrap)
    producer.produce(TOPIC, value=PAYLOAD, partition=QUIET)
    producer.flush(30)
    consumer = _tail_consumer(bootstrap)
    counter = BatchCounter(bootstrap)
    rows: list[dict[str, Any]] = []
    sent, wall, tail_stalled_at = 0, time.monotonic(), None
    with WireClient(bootstrap, timeout_s=give_up_s) as client:
        while sent < total:
            acks = []
            for _ in range(every):
                started = time.perf_counter()
                producer.produce(TOPIC, value=PAYLOAD, partition=LOADED)
                producer.flush(give_up_s)
                acks.append((time.perf_counter() - started) * 1000)
            sent += every
            row = _measure_point(client, producer, consumer if tail_stalled_at is None else None,
                                 counter, sent, acks, give_up_s)
            row["elapsed_s"] = round(time.monotonic() - wall, 1)
            rows.append(row)
            print(row, flush=True)
            if row["consume_ms"] == float("inf") and tail_stalled_at is None:
                tail_stalled_at = row["stored_batches"]
            if (max(row["tail_fetch_ms"], row["fresh_consumer_ms"], max(acks)) > give_up_s * 1000
                    or row["served_by_max_wait_ms"].get(str(MAX_WAITS_MS[-1])) == f"0/{TRIES}"):
                break
    consumer.close()
    return {"points": rows, "stopped_at_batches": rows[-1]["stored_batches"] if rows else 0,
            "tailing_consumer_stalled_at_batches": tail_stalled_at}


def _measure_point(client: WireClient, producer: Any, consumer: Any | None, counter: BatchCounter,
                   sent: int, acks: list[float], give_up_s: float) -> dict[str, Any]:
    try:
        counter.update({TOPIC: [LOADED, QUIET]})
        stored = counter.batches[(TOPIC, LOADED)]
        tail = [_timed_fetch(client, LOADED, counter.next_offset[(TOPIC, LOADED)] - 1)
                for _ in range(3)]
        quiet = [_timed_fetch(client, QUIET, 0) for _ in range(3)]
        served = _served_by_max_wait(client, counter.next_offset[(TOPIC, LOADED)] - 1)
    except (TimeoutError, OSError):
        stored, tail, quiet, served = -1, [float("inf")], [float("inf")], {}
    consume = (_consume_latency(producer, consumer, f"marker-{sent}".encode(), give_up_s)
               if consumer is not None else float("inf"))
    fresh = _fresh_consumer_latency(counter.bootstrap, counter.next_offset.get(
        (TOPIC, LOADED), 1) - 1, give_up_s)
    return {"sent": sent, "stored_batches": stored,
            "ack_ms": {k: round(v, 2) for k, v in percentiles(acks, (50, 99)).items()},
            "tail_fetch_ms": round(sorted(tail)[len(tail) // 2], 2),
            "quiet_partition_fetch_ms": round(sorted(quiet)[len(quiet) // 2], 2),
            "consume_ms": round(consume, 1), "fresh_consumer_ms": round(fresh, 1),
            "served_by_max_wait_ms": served}


def summary(result: dict[str, Any]) -> list[str]:
    waits = "  ".join(f"{w:>4d}" for w in MAX_WAITS_MS)
    lines = ["batches  ack p50/p99 ms  tail fetch ms  quiet fetch ms  tailing ms  fresh ms  "
             f"served at max wait {waits} ms"]
    for row in result["points"]:
        lines.append(f"{row['stored_batches']:7d}  {row['ack_ms']['p50']:6.1f} "
                     f"{row['ack_ms']['p99']:6.1f}  {row['tail_fetch_ms']:13.1f}  "
                     f"{row['quiet_partition_fetch_ms']:14.1f}  {row['consume_ms']:10.1f}  "
                     f"{row['fresh_consumer_ms']:8.1f}  " + " ".join(
                         f"{row['served_by_max_wait_ms'].get(str(w), '-'):>4s}"
                         for w in MAX_WAITS_MS))
    lines.append(f"stopped at {result['stopped_at_batches']} stored batches; the tailing "
                 f"consumer stalled at {result['tailing_consumer_stalled_at_batches']}")
    return lines


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench.tansu_batches", description="Tansu latency vs batches per partition."
    )
    parser.add_argument("--batches", type=int, default=50_000, help="batches to write")
    parser.add_argument("--every", type=int, default=1_000, help="batches between measurements")
    parser.add_argument("--give-up", type=float, default=30.0,
                        help="seconds after which a measurement counts as stalled")
    parser.add_argument("--out", help="result file (default bench/results/tansu_batches-DATE)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    from spark_jobs.local.broker import EmbeddedBroker

    args = parse_args(argv)
    machine = machine_info()
    with EmbeddedBroker(port=0) as broker:
        result = measure(broker.bootstrap, args.batches, args.every, args.give_up)
    result = {"benchmark": "tansu_batches", "machine": machine,
              "parameters": {"batches": args.batches, "every": args.every,
                             "give_up_s": args.give_up, "payload_bytes": len(PAYLOAD)},
              **result}
    publish_result("tansu_batches", args.out, result, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
