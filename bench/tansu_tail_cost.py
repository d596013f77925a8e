"""The embedded broker's CPU for one tailing consumer, by the consumer's fetch max wait, as a
partition's record batches pile up; and how long a record waits for such a consumer.

Traffic as a live run makes it: one partition receiving a batch of --records every ~20 ms
(9k/s at a 25 ms linger), read at the tail by one consumer (the jobs' tail index is one, its
fetch max wait `tail_index.TAIL_FETCH_WAIT_MS`). At each mark of --marks batches, filled fast
beforehand, the broker process's CPU (`/proc`) is sampled over --seconds of that traffic.
A run without the consumer gives the producing alone. Then, per max wait, a record produced
at a random moment on a quiet partition: milliseconds until the tailing consumer has it.

    .venv/bin/python -m bench.tansu_tail_cost [--waits 5,20,50] [--marks 1500,5000,10000]
"""

from __future__ import annotations

import argparse
import os
import random
import threading
import time
from collections.abc import Sequence
from typing import Any

from bench.common import machine_info, percentiles, publish_result

NAME = "tansu_tail_cost"
VALUE = (b'{"transactionId":4,"eventTime":1795000000000,"payeeId":9034,"beneficiaryId":17209,'
         b'"paymentAmount":13.08,"paymentType":"CRD"}')
BATCH_EVERY_S = 0.02
RECORD_TIMEOUT_S = 30.0
NO_CONSUMER = "no consumer"


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _producer(bootstrap: str, linger_ms: int) -> Any:
    from confluent_kafka import Producer

    from spark_jobs.streaming.kafka.producer import PRODUCER_DEFAULTS

    return Producer({**PRODUCER_DEFAULTS, "bootstrap.servers": bootstrap,
                     "linger.ms": linger_ms, "log_level": 0})


def _tailing(bootstrap: str, topic: str, wait_ms: int, group: str) -> Any:
    """A consumer at the tail with the tail index's fetch settings (but its max wait)."""
    from confluent_kafka import OFFSET_END, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "fetch.wait.max.ms": wait_ms, "fetch.queue.backoff.ms": 1,
                         "fetch.error.backoff.ms": 10, "queued.max.messages.kbytes": 8_192,
                         "log_level": 0})
    consumer.assign([TopicPartition(topic, 0, OFFSET_END)])
    return consumer


def _send_batch(producer: Any, topic: str, records: int) -> None:
    for _ in range(records):
        producer.produce(topic, VALUE, partition=0)
    producer.flush(30)


def broker_share(bootstrap: str, pid: int, wait_ms: int | None, marks: Sequence[int],
                 records: int, seconds: float) -> list[dict[str, Any]]:
    """% of a core the broker spends at each mark of batches (wait_ms None: no consumer)."""
    topic = f"tail_{wait_ms}"
    # a linger longer than the time to queue a batch: one flush is one record batch
    producer = _producer(bootstrap, 25)
    _send_batch(producer, topic, 1)
    stop = threading.Event()

    def tail() -> None:
        consumer = _tailing(bootstrap, topic, wait_ms or 0, f"tail-{wait_ms}")
        while not stop.is_set():
            consumer.consume(2_000, 0.02)
        consumer.close()

    reader = threading.Thread(target=tail, daemon=True)
    if wait_ms is not None:
        reader.start()
    batches, shares = 1, []
    try:
        for mark in marks:
            while batches < mark:
                _send_batch(producer, topic, records)
                batches += 1
            cpu, started = _cpu_s(pid), time.perf_counter()
            while time.perf_counter() - started < seconds:
                _send_batch(producer, topic, records)
                batches += 1
                time.sleep(BATCH_EVERY_S)
            elapsed = time.perf_counter() - started
            shares.append({"mark": mark, "batches_at_end": batches,
                           "broker_pct_of_a_core": round((_cpu_s(pid) - cpu) / elapsed * 100, 1)})
            print(f"  wait {wait_ms}: {shares[-1]}", flush=True)
    finally:
        stop.set()
        if reader.is_alive():
            reader.join()
    return shares


def record_wait(bootstrap: str, wait_ms: int, records: int, seed: int = 1) -> dict[str, float]:
    """Milliseconds from produce to the tailing consumer, records sent at random moments."""
    rng, topic = random.Random(seed), f"quiet_{wait_ms}"
    producer = _producer(bootstrap, 0)  # each record sent at once
    _send_batch(producer, topic, 1)
    consumer = _tailing(bootstrap, topic, wait_ms, f"quiet-{wait_ms}")
    consumer.poll(1.0)
    delays = []
    try:
        for _ in range(records):
            time.sleep(rng.uniform(0.01, 0.3))
            started = time.perf_counter()
            producer.produce(topic, VALUE, partition=0)
            producer.poll(0)
            message = None
            while message is None or message.error():
                if time.perf_counter() - started > RECORD_TIMEOUT_S:
                    raise TimeoutError(f"a record did not reach the consumer in "
                                       f"{RECORD_TIMEOUT_S} s (fetch max wait {wait_ms} ms)")
                message = consumer.poll(1.0)
            delays.append((time.perf_counter() - started) * 1000)
    finally:
        consumer.close()
    return {**percentiles(delays, (50, 95)), "max": round(max(delays), 1)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"bench.{NAME}", description=__doc__.split("\n")[0])
    parser.add_argument("--waits", default="5,20,50")
    parser.add_argument("--marks", default="1500,5000,10000")
    parser.add_argument("--records", type=int, default=225, help="per batch")
    parser.add_argument("--seconds", type=float, default=10.0, help="sampled at each mark")
    parser.add_argument("--delays", type=int, default=80, help="records timed per max wait")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    from spark_jobs.local.broker import EmbeddedBroker

    waits = [int(w) for w in args.waits.split(",")]
    marks = [int(m) for m in args.marks.split(",")]
    result: dict[str, Any] = {"benchmark": NAME, "machine": machine_info(),
                              "params": vars(args), "broker_share": {}, "record_wait_ms": {}}
    for wait in [None, *waits]:  # each on a broker of its own: its partition alone counts
        with EmbeddedBroker(port=0) as broker:
            assert broker.pid is not None
            result["broker_share"][NO_CONSUMER if wait is None else str(wait)] = broker_share(
                broker.bootstrap, broker.pid, wait, marks, args.records, args.seconds)
    with EmbeddedBroker(port=0) as broker:
        for wait in waits:
            result["record_wait_ms"][str(wait)] = record_wait(broker.bootstrap, wait,
                                                              args.delays)

    def summary(res: dict[str, Any]) -> list[str]:
        lines = [("producing alone" if wait == NO_CONSUMER else f"fetch max wait {wait} ms")
                 + ": broker " + ", ".join(
            f"{s['broker_pct_of_a_core']} % at {s['mark']}-{s['batches_at_end']} batches"
            for s in shares)
            for wait, shares in res["broker_share"].items()]
        lines += [f"fetch max wait {wait} ms: a record waits {ms} ms"
                  for wait, ms in res["record_wait_ms"].items()]
        return lines

    publish_result(NAME, args.out, result, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
