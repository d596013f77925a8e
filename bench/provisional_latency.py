"""Provisional latency: from a record's production to the raw topic until a reader sees it in
experiment_metrics_provisional (issue 17: "a record is visible on the page within 30 s p99").

The three experiments jobs run streaming with their production trigger (jobs.trigger), as
queries of one SparkSession, under live background traffic (bench/freshness.py's generator,
event time at wall-clock speed). A probe experiment of its own, ramped up before the run,
gets one activation of a probe user; then every `--every` seconds one probe event of that
user goes to the `events` topic, stamped with the traffic's current event time (so it is
neither late nor ahead of the activations the source aligns it with). The probe group's
live volume counts the probe events, so probe k is visible once a reader sees volume >= k;
a reader (`visible`) is polled every POLL_S and the latency of each probe is the first poll
that saw it minus its production time.

The reader is pluggable: `visible(settings) -> int`, the probe events it sees. The default
polls the table with delta-rs, as a reader of the lake would; a dashboard variant can count
the same probe row through the HTTP API.

    .venv/bin/python -m bench.provisional_latency [--probes 40] [--every 2] [--users 2000]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from bench.common import (
    JOBS,
    bench_settings,
    machine_info,
    percentiles,
    publish_result,
    sandbox,
    start_jobs,
)
from bench.freshness import (
    EXPERIMENTS,
    LiveGenerator,
    live_spec,
    load_ramps,
    real_time_rate,
    wait_until_steady,
)
from spark_jobs.contracts.tables import TABLE_PROVISIONAL_METRICS
from spark_jobs.contracts.topics import TOPIC_ACTIVATIONS, TOPIC_EVENTS
from spark_jobs.settings import Settings

NAME = "provisional_latency"
PROBE_EXPERIMENT, PROBE_GROUP, PROBE_TYPE = "probe_live", "probe", "click"
PROBE_USER = 10**12  # no generated user has this id
PROBE_BEHIND_MS = 3_000  # probes trail the traffic's expected event time (it wobbles)
POLL_S = 0.1
TIMEOUT_S = 120.0  # a probe not seen by then is reported as lost
QS = (50, 90, 99)

Visible = Callable[[Settings], int]


def visible_in_table(settings: Settings) -> int:
    """The probe events a reader of experiment_metrics_provisional sees: the volume of the
    probe group's row (0 before the table or the row exists)."""
    from spark_jobs.streaming.lake.delta import read_arrow, table_exists

    uri = settings.lake.table(TABLE_PROVISIONAL_METRICS)
    if not table_exists(uri):
        return 0
    rows = read_arrow(uri, columns=["experiment_hash", "event_type", "volume"]).to_pylist()
    return max((r["volume"] for r in rows
                if r["experiment_hash"] == PROBE_EXPERIMENT and r["event_type"] == PROBE_TYPE),
               default=0) or 0


def add_probe_ramp(settings: Settings, start_ms: int) -> None:
    """The probe experiment's one group, ramped up at start_ms (before the snapshot)."""
    from spark_jobs.experiments.admin.metadata import add_ramps
    from spark_jobs.experiments.core.periods import RampRow

    add_ramps(settings.metadata.url, [RampRow(PROBE_EXPERIMENT, PROBE_GROUP, start_ms, 50.0,
                                              False)])


class Prober:
    """Sends the probe records (to the raw topics, as clients do) and times their sight."""

    def __init__(self, settings: Settings, event_time_offset_ms: int, visible: Visible) -> None:
        from spark_jobs.streaming.kafka.producer import make_producer

        self.settings = settings
        self.offset_ms = event_time_offset_ms
        self.visible = visible
        self.producer = make_producer(settings.kafka, **{"linger.ms": 0})
        self.sent_at: list[float] = []  # wall clock (s) of each probe event's production
        self.seen_at: list[float] = []  # wall clock (s) of the first poll that saw it
        self.last_ts = 0

    def _ts(self) -> int:
        ts = int(time.time() * 1000) + self.offset_ms - PROBE_BEHIND_MS
        self.last_ts = max(ts, self.last_ts + 1)  # distinct: a repeated ts is a duplicate
        return self.last_ts

    def _send(self, topic: str, value: dict[str, Any]) -> float:
        self.producer.produce(topic, key=str(PROBE_USER).encode(), value=orjson.dumps(value))
        sent = time.time()
        self.producer.flush(10)
        return sent

    def activate(self) -> None:
        self._send(TOPIC_ACTIVATIONS, {"user_id": PROBE_USER, "experiment_hash": PROBE_EXPERIMENT,
                                       "experiment_group": PROBE_GROUP, "ts": self._ts()})

    def probe(self) -> None:
        value = {"user_id": PROBE_USER, "event_type": PROBE_TYPE, "ts": self._ts()}
        self.sent_at.append(self._send(TOPIC_EVENTS, value))

    def poll(self) -> None:
        """Mark every sent probe the reader now counts as seen (volume only grows)."""
        count = min(self.visible(self.settings), len(self.sent_at))
        now = time.time()
        while len(self.seen_at) < count:
            self.seen_at.append(now)

    def run(self, probes: int, every_s: float, check: Callable[[], None]) -> None:
        """Send `probes` probes `every_s` apart and poll until all are seen (or one waited
        TIMEOUT_S: it is lost, and reported as fewer probes seen)."""
        next_probe = time.monotonic()
        while len(self.sent_at) < probes or len(self.seen_at) < len(self.sent_at):
            check()
            if len(self.sent_at) < probes and time.monotonic() >= next_probe:
                self.probe()
                next_probe += every_s
            self.poll()
            if self._oldest_unseen_s() > TIMEOUT_S:
                break
            time.sleep(POLL_S)

    def _oldest_unseen_s(self) -> float:
        if len(self.seen_at) == len(self.sent_at):
            return 0.0
        return time.time() - self.sent_at[len(self.seen_at)]

    def latencies_ms(self) -> list[float]:
        return [(seen - sent) * 1000 for sent, seen in zip(self.sent_at, self.seen_at,
                                                           strict=False)]


def run(settings: Settings, users: int, probes: int, every_s: float, visible: Visible
        ) -> dict[str, Any]:
    from spark_jobs.streaming.spark_session import build_session

    spec = live_spec(settings, users)
    rate = real_time_rate(spec)
    minutes = (probes * every_s + TIMEOUT_S) / 60
    add_probe_ramp(settings, int(time.time() * 1000) - 60_000)
    load_ramps(settings, spec, minutes)  # publishes the snapshot, the probe ramp included
    spark = build_session(settings, app_name="tideline-bench-provisional")
    jobs = None
    generator = LiveGenerator(spec, settings, rate)
    try:
        jobs = start_jobs(spark, settings, JOBS)
        wait_until_steady(jobs)
        generator.start()
        time.sleep(5)  # the first batches of the traffic go through before the first probe
        prober = Prober(settings, spec.start_ms - int(generator.started_at * 1000), visible)
        prober.activate()
        prober.run(probes, every_s, jobs.check)
        report = generator.stop()
    finally:
        if jobs is not None:
            jobs.stop()
        spark.stop()
    latencies = prober.latencies_ms()
    return {
        "params": {"probes": probes, "every_s": every_s, "users": users, "rate": round(rate, 1),
                   "trigger_ms": settings.jobs.trigger_ms, "experiments": EXPERIMENTS,
                   "reader": visible.__name__, "poll_s": POLL_S},
        "background_messages": report.total(),
        "achieved_rate": round(report.rate, 1),
        "probes_sent": len(prober.sent_at),
        "probes_seen": len(latencies),
        "latency_ms": {**percentiles(latencies, QS), "max": round(max(latencies, default=0))},
        "latencies_ms": [round(x) for x in latencies],
    }


def summary(result: dict[str, Any]) -> list[str]:
    latency, params = result["latency_ms"], result["params"]
    return [
        f"{NAME}: {result['probes_seen']} of {result['probes_sent']} probes seen by "
        f"{params['reader']}, background {result['achieved_rate']} msg/s, trigger "
        f"{params['trigger_ms']} ms",
        "  raw topic -> visible in experiment_metrics_provisional: "
        + ", ".join(f"{k} {v / 1000:.1f} s" for k, v in latency.items()),
    ]


def main(argv: Sequence[str] | None = None, visible: Visible = visible_in_table) -> int:
    parser = argparse.ArgumentParser(prog=f"bench.{NAME}", description=__doc__.split("\n")[0])
    parser.add_argument("--probes", type=int, default=40)
    parser.add_argument("--every", type=float, default=2.0, help="seconds between probes")
    parser.add_argument("--users", type=int, default=2000, help="background users "
                        "(their real-time rate: about 40 msg/s for 2000)")
    parser.add_argument("--out", default=None, help="result JSON (default bench/results/...)")
    args = parser.parse_args(argv)
    machine = machine_info()
    with sandbox(NAME) as box:
        settings = bench_settings(box, {"experiments": EXPERIMENTS})
        result = run(settings, args.users, args.probes, args.every, visible)
    publish_result(NAME, args.out, {"benchmark": NAME, "machine": machine, **result}, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
