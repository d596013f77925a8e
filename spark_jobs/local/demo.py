"""`tideline demo`: the whole experiment pipeline on one machine, with a live summary.

Starts the embedded broker (unless kafka.bootstrap points elsewhere), loads demo
experiments, publishes the ramp snapshot (again every 5 minutes, as the Airflow DAG does),
starts the generator at a steady rate and the three jobs as queries of one SparkSession,
and prints rows/s, lag, watermark and the latest metrics until Ctrl-C; then it stops
everything it started. Durations are compressed so windows close within a minute.
"""

from __future__ import annotations

import threading
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from typing import Any

from spark_jobs.catalog import JOBS
from spark_jobs.contracts.tables import TABLE_EXPERIMENT_METRICS
from spark_jobs.control.monitor.lag import offsets_dict
from spark_jobs.experiments.core.periods import RampRow
from spark_jobs.experiments.core.tumbling_windows import window_end
from spark_jobs.settings import EMBEDDED_BROKER_PORT, Settings, build_settings, deep_merge

DEMO_JOBS = tuple(job.name for job in JOBS if job.system == "experiments")  # pipeline order
DEMO_EXPERIMENTS = {
    "period": "30m",
    "window": "1m",
    "lateness": "20s",
    "dedup_ttl": "20s",
    "cap_per_user_hour": 300,
}
# Every job writes about one record batch per output partition per micro-batch, and the
# embedded broker degrades with the batches a partition holds (streaming/traffic/sending.py):
# a 10 s trigger keeps that to ~360-390 an hour, about a day; windows are a minute here anyway.
DEMO_JOBS_SETTINGS = {"trigger": "10s"}
# `tideline demo` compresses time (its event time runs ~100x the wall clock at the default
# rate), so the clock-skew guard (CONTRACTS section 9) would take its records for a device
# clock years ahead: it allows ten years of skew. `tideline platform` sends in real time.
ACCELERATED_JOBS_SETTINGS = {"max_clock_skew": "3650d"}
REFRESH_S = 3.0


def demo_settings(settings: Settings) -> Settings:
    """Compressed durations and a 10 s trigger, each unless the user configured it."""
    tree = settings.raw
    return build_settings(deep_merge(tree, {
        "experiments": _unconfigured(tree, "experiments", DEMO_EXPERIMENTS),
        "jobs": _unconfigured(tree, "jobs", DEMO_JOBS_SETTINGS),
    }))


def accelerated_settings(settings: Settings) -> Settings:
    """demo_settings, and a clock skew that time compressed at the demo's rate needs."""
    compressed = demo_settings(settings)
    tree = compressed.raw
    return build_settings(deep_merge(tree, {
        "jobs": _unconfigured(tree, "jobs", ACCELERATED_JOBS_SETTINGS)}))


def _unconfigured(tree: dict[str, Any], section: str, wanted: dict[str, Any]) -> dict[str, Any]:
    """The `wanted` values whose key the user left at its default."""
    configured = {k for k, v in tree[section].items() if str(v) != str(_default(section, k))}
    return {k: v for k, v in wanted.items() if k not in configured}


def _default(section: str, key: str) -> Any:
    from spark_jobs.settings import DEFAULTS

    return DEFAULTS[section][key]


def _uses_embedded_broker(settings: Settings) -> bool:
    return settings.kafka.bootstrap == f"127.0.0.1:{EMBEDDED_BROKER_PORT}"


def _offsets_lag(progress: dict[str, Any]) -> int | None:
    """Messages in the job's topics not yet read: latest offsets minus the batch's end."""
    lag = 0
    for source in progress.get("sources", []):
        latest, end = (offsets_dict(source.get(name)) for name in ("latestOffset", "endOffset"))
        if latest is None or end is None:
            return None
        lag += sum(max(0, int(n) - int(end.get(key, 0))) for key, n in latest.items())
    return lag


def _drain_then_stop(query: Any, seconds: float = 30.0) -> None:
    """Let the running micro-batch finish (traffic is already stopped), then stop the query;
    interrupting a batch mid-way makes Spark print long, harmless stack traces."""
    drained = threading.Thread(target=query.processAllAvailable, daemon=True)
    drained.start()
    drained.join(seconds)
    query.stop()


def _fmt_ms(ms: int | None) -> str:
    if not ms:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%m-%d %H:%M:%S")


def _print_summary(queries: dict[str, Any], settings: Settings) -> None:
    from spark_jobs.streaming.lake.delta import read_arrow, table_exists

    print(f"\n== {datetime.now(UTC).strftime('%H:%M:%S')} UTC " + "=" * 60)
    for name, query in queries.items():
        progress = query.lastProgress or {}
        watermark = (progress.get("eventTime") or {}).get("watermark", "-")
        lag = _offsets_lag(progress) if progress else None
        print(
            f"{name:20s} in {progress.get('inputRowsPerSecond', 0):9.0f} rows/s  "
            f"done {progress.get('processedRowsPerSecond', 0):9.0f} rows/s  "
            f"batch {progress.get('batchId', '-'):>5}  lag {lag if lag is not None else '-':>7}  "
            f"watermark {watermark}"
        )
    uri = settings.lake.table(TABLE_EXPERIMENT_METRICS)
    if not table_exists(uri):
        print("experiment_metrics: no closed window yet")
        return
    table = read_arrow(uri).to_pandas()
    latest = table.sort_values("window_end").groupby(
        ["experiment_hash", "experiment_group", "period_start", "event_type"]
    ).tail(1)
    latest = latest[latest["event_type"] == settings.experiments.critical_event_types[0]]
    for row in latest.sort_values(["experiment_hash", "experiment_group"]).itertuples():
        print(
            f"  {row.experiment_hash:10s} {row.experiment_group:10s} W={_fmt_ms(row.window_end)} "
            f"triggered={row.triggered_users:6d} {row.event_type}: volume={row.volume:7d} "
            f"propensity={row.propensity:6d}"
        )


def run_demo(settings: Settings, rate: float = 2000.0, seconds: float | None = None) -> int:
    from spark_jobs.experiments.admin.metadata import add_ramps, read_ramps
    from spark_jobs.experiments.admin.snapshot import publish_snapshot
    from spark_jobs.experiments.traffic import TrafficSpec, live_disorder_ms, start_live_traffic
    from spark_jobs.local.broker import EmbeddedBroker
    from spark_jobs.streaming.progress import ProgressFileListener
    from spark_jobs.streaming.runner import start_job
    from spark_jobs.streaming.spark_session import build_session

    settings = accelerated_settings(settings)
    stop = threading.Event()
    with ExitStack() as stack:
        if _uses_embedded_broker(settings):
            broker = EmbeddedBroker(port=EMBEDDED_BROKER_PORT,
                                    bind=settings.kafka.broker_bind).start()
            stack.callback(broker.stop)
            print(f"embedded broker on {broker.bootstrap}")

        start_ms = window_end(int(time.time() * 1000), settings.experiments.window_ms)
        spec = TrafficSpec.from_settings(
            settings.experiments, start_ms=start_ms, n_users=1000,
            disorder_ms=live_disorder_ms(settings.experiments.lateness_ms))
        if not read_ramps(settings.metadata.url):
            rows = [RampRow(**row) for row in spec.ramp_rows(cycles=200)]
            add_ramps(settings.metadata.url, rows)
            print(f"loaded {len(rows)} demo ramp rows into {settings.metadata.url}")

        def publish_forever() -> None:
            while not stop.is_set():
                path = publish_snapshot(settings, int(time.time() * 1000) + 10 * 86_400_000, None)
                print(f"published ramp snapshot {path.name}")
                stop.wait(settings.experiments.snapshot_interval_ms / 1000)

        publisher = threading.Thread(target=publish_forever, name="snapshot", daemon=True)
        publisher.start()

        generator = start_live_traffic(spec, settings, rate, stop)

        spark = build_session(settings, app_name="tideline-demo", tools=True)
        stack.callback(spark.stop)
        queries = {}
        for name in DEMO_JOBS:
            spark.streams.addListener(ProgressFileListener(settings, name))
            query, sink = start_job(spark, settings, name)
            queries[name] = query
            stack.callback(_drain_then_stop, query)
            if hasattr(sink, "close"):
                stack.callback(sink.close)
        stack.callback(generator.join, 30)  # stop traffic first, then jobs, Spark, broker
        stack.callback(stop.set)
        print("demo running; Ctrl-C stops everything it started")
        started = time.monotonic()
        try:
            while seconds is None or time.monotonic() - started < seconds:
                time.sleep(REFRESH_S)
                failed = [n for n, q in queries.items() if q.exception() is not None]
                if failed:
                    print(f"job(s) failed: {failed}: {queries[failed[0]].exception()}")
                    return 1
                _print_summary(queries, settings)
        except KeyboardInterrupt:
            print("\nstopping...")
    return 0
