"""`tideline platform`: the whole platform on one machine, managed through the Airflow UI.

It starts the embedded broker (unless kafka.bootstrap points elsewhere), loads demo
experiments into the metadata DB, publishes a first ramp snapshot, starts Airflow standalone
(SQLite, LocalExecutor, 127.0.0.1, login with a generated password) with the Tideline DAGs
unpaused, serves the results dashboard (`dashboard.port`, 8050), and produces synthetic
traffic at a steady rate. It deploys the streaming jobs itself before Airflow starts (the
slowest part), so the first results come while Airflow does; the `streaming_jobs` DAG then
watches (and restarts) them every minute, `ramp_snapshot` publishes every 5 minutes,
`daily_validation` and `maintenance` run daily. Ctrl-C (or SIGTERM) stops Airflow,
the generator, the streaming jobs and the broker, in that order, so nothing restarts a job that is
being stopped and nothing is left running.

Durations are the demo's compressed ones (`spark_jobs.local.demo.demo_settings`). The traffic's
event time follows the wall clock, `EVENT_TIME_LAG` behind it: ramp snapshots are published
as of the wall clock every 5 minutes, so with that lag every period's ramp-up is in a
snapshot before the first activation of it arrives.

With the embedded broker, which keeps messages in memory only, every start begins with empty
topics, so the jobs' checkpoints of an earlier session are cleared (`forget_previous_broker`).

With `--cluster` (`spark_jobs.local.platform_cluster`) it also starts a Spark standalone
cluster, every Spark application of the platform runs there, and the cluster stops last but
the broker.

`daily_validation` catches up from `validation.start_date`; when that is not configured,
the platform uses the day before it first ran on this Airflow home (remembered in the home,
so restarts do not move it).
"""

from __future__ import annotations

import dataclasses
import datetime
import shutil
import signal
import sys
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from spark_jobs.cluster.standalone import ClusterError
from spark_jobs.config.steps import showing, step
from spark_jobs.control.orchestration.environment import DAG_IDS
from spark_jobs.control.orchestration.standalone import AirflowStartError
from spark_jobs.results.dashboard.server import DashboardServer, DashboardStartError
from spark_jobs.settings import EMBEDDED_BROKER_PORT, Settings, build_settings, deep_merge

EVENT_TIME_LAG = datetime.timedelta(minutes=6)
DEFAULT_USERS = 10_000
RAMP_CYCLES = 200  # traffic cycles (2 h each) with ramps: over two weeks of running
START_DATE_FILE = "validation_start_date"
DAG_PARSE_TIMEOUT_S = 120.0
CHECK_EVERY_S = 5.0


@dataclass(frozen=True)
class AirflowAccess:
    """What a person needs to log in."""

    url: str
    user: str
    password: str


def uses_embedded_broker(settings: Settings) -> bool:
    return settings.kafka.bootstrap == f"127.0.0.1:{EMBEDDED_BROKER_PORT}"


def platform_start_date(settings: Settings, today: datetime.date | None = None) -> str:
    """validation.start_date, else the day before the platform's first start on this home."""
    if settings.validation.start_date is not None:
        return settings.validation.start_date
    remembered = Path(settings.airflow.home) / START_DATE_FILE
    if remembered.is_file():
        return datetime.date.fromisoformat(remembered.read_text().strip()).isoformat()
    today = today or datetime.datetime.now(datetime.UTC).date()
    chosen = (today - datetime.timedelta(days=1)).isoformat()
    remembered.parent.mkdir(parents=True, exist_ok=True)
    remembered.write_text(chosen + "\n")
    return chosen


def platform_settings(settings: Settings) -> Settings:
    """The demo's compressed durations plus a validation start date."""
    from spark_jobs.local.demo import demo_settings

    compressed = demo_settings(settings)
    start = {"validation": {"start_date": platform_start_date(compressed)}}
    return build_settings(deep_merge(compressed.raw, start))


def traffic_spec(settings: Settings, users: int, now_ms: int) -> Any:
    """Endless traffic, with the disorder that the live producer's batching leaves room for,
    whose first ramp-up lies on the first window boundary EVENT_TIME_LAG before now: the
    live traffic starts there (`live_start_ms`), so the first results do not wait for the
    quiet minutes before any experiment is ramped."""
    from spark_jobs.experiments.core.tumbling_windows import window_end
    from spark_jobs.experiments.traffic import TrafficSpec, live_disorder_ms

    window_ms = settings.experiments.window_ms
    lag_ms = int(EVENT_TIME_LAG.total_seconds() * 1000)
    live_from = window_end(now_ms - lag_ms, window_ms)
    spec = TrafficSpec.from_settings(
        settings.experiments, start_ms=live_from, n_users=users,
        disorder_ms=live_disorder_ms(settings.experiments.lateness_ms))
    return dataclasses.replace(spec, start_ms=live_from - _lead_ms(spec))


def live_start_ms(spec: Any) -> int:
    """Where the live traffic of `traffic_spec` starts: the window of its first ramp-up."""
    return spec.start_ms + _lead_ms(spec)


def _lead_ms(spec: Any) -> int:
    """Whole windows from the traffic's start to the window of its first ramp-up."""
    from spark_jobs.experiments.traffic import first_ramp_up_ms

    lead = first_ramp_up_ms(spec) - spec.start_ms
    return lead - lead % spec.window_ms


def realtime_rate(spec: Any) -> float:
    """Messages per second that make event time advance as fast as the wall clock."""
    from spark_jobs.experiments.traffic import TrafficGenerator

    messages = sum(len(chunk) for chunk in TrafficGenerator(spec).chunks(1))
    return messages / (spec.duration_ms / 1000)


def load_demo_ramps(settings: Settings, spec: Any) -> int:
    """Add the ramps of this traffic (its experiments ramp relative to its start) unless they
    are in the metadata DB already; returns the rows added.

    Ramps of an earlier start stay: the DB may hold a user's own experiments too.
    """
    from spark_jobs.experiments.admin.metadata import add_ramps, read_ramps
    from spark_jobs.experiments.core.periods import RampRow

    rows = [RampRow(**row) for row in spec.ramp_rows(cycles=RAMP_CYCLES)]
    first = (rows[0].experiment_hash, rows[0].experiment_group, rows[0].ramp_ts)
    known = {(r.experiment_hash, r.experiment_group, r.ramp_ts)
             for r in read_ramps(settings.metadata.url)}
    return 0 if first in known else add_ramps(settings.metadata.url, rows)


def forget_previous_broker(settings: Settings) -> list[str]:
    """Clear what the streaming jobs keep about an earlier embedded broker; returns the jobs
    whose checkpoint was cleared.

    The embedded broker holds messages in memory only, so a new one starts with empty
    topics, and a job resuming from a checkpoint of an earlier session asks for offsets that
    no longer exist and fails (then restarts in a loop). Jobs left running by an earlier
    session are stopped first; then checkpoints, progress reports and restart history go.
    The Delta tables keep their rows: sinks key their exactly-once commits by checkpoint
    lineage, so new checkpoints start new lineages instead of being skipped.
    """
    from spark_jobs.catalog import JOB_NAMES
    from spark_jobs.control.monitor.restarts import clear_restarts
    from spark_jobs.control.monitor.supervisor import stop_all_jobs
    from spark_jobs.streaming.progress import progress_dir

    if "://" in settings.lake.checkpoints:
        return []  # an object store: only a local demo lake is cleared
    stop_all_jobs(settings)
    cleared = []
    for job in JOB_NAMES:
        checkpoint = Path(settings.lake.checkpoint(job))
        if checkpoint.exists():
            shutil.rmtree(checkpoint)
            cleared.append(job)
        for suffix in (".json", ".jsonl", ".jsonl.1"):
            (progress_dir(settings) / f"{job}{suffix}").unlink(missing_ok=True)
        clear_restarts(settings, job)
    return cleared


def start_airflow(settings: Settings, stack: ExitStack) -> tuple[Any, AirflowAccess]:
    """Airflow standalone with every Tideline DAG unpaused (stopped when `stack` closes) and
    how to log in."""
    from spark_jobs.control.orchestration.airflow_api import AirflowClient
    from spark_jobs.control.orchestration.environment import (
        ADMIN_USER,
        SETTINGS_FILE,
        airflow_environment,
        write_settings_file,
    )
    from spark_jobs.control.orchestration.standalone import AirflowStandalone

    home = Path(settings.airflow.home)
    settings_file = write_settings_file(settings, home / SETTINGS_FILE)
    env = airflow_environment(settings, settings_file=settings_file, paused_at_creation=False)
    airflow = AirflowStandalone(env, home / "logs" / "standalone.log")
    stack.callback(_report_stopped, "Airflow")
    stack.callback(airflow.stop)
    print(f"starting Airflow (log: {airflow.log_path}) ...", flush=True)
    step("Airflow")
    airflow.start()
    password = airflow.admin_password()
    with AirflowClient(airflow.local_url, ADMIN_USER, password) as client:
        step("Airflow: waiting for the Tideline DAGs")
        client.wait_for_dags(list(DAG_IDS), DAG_PARSE_TIMEOUT_S)
        for dag in client.dags():  # DAGs paused in an earlier session of this home resume
            if dag["dag_id"] in DAG_IDS and dag["is_paused"]:
                client.unpause(dag["dag_id"])
    return airflow, AirflowAccess(settings.airflow.base_url, ADMIN_USER, password)


def deploy_streaming_jobs(settings: Settings) -> list[str]:
    """Start the jobs of `monitor.jobs` now, as the streaming_jobs DAG would, so that they
    start up while Airflow does: a new user sees the first results about a minute sooner.
    The DAG then watches them like any job it deployed (their pid files say so). Returns
    the jobs started (one already running is left alone)."""
    from spark_jobs.control.monitor.supervisor import JobAlreadyRunningError, launch_job

    started = []
    for job in settings.monitor.jobs:
        try:
            record = launch_job(settings, job)
        except JobAlreadyRunningError:
            continue
        started.append(job)
        print(f"deployed {job} (pid {record.pid}, log {record.log})", flush=True)
    return started


def _report_stopped(what: str) -> None:
    print(f"stopped {what}", flush=True)


def _stop_streaming_jobs(settings: Settings) -> None:
    from spark_jobs.control.monitor.supervisor import stop_all_jobs

    stopped = stop_all_jobs(settings)
    print(f"stopped streaming jobs: {', '.join(stopped) or 'none running'}", flush=True)


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def stop_on_signals() -> dict[int, Any]:
    """Make SIGINT and SIGTERM stop the platform cleanly; returns the handlers they had.

    SIGINT too, explicitly: a non-interactive shell starts background commands with SIGINT
    ignored, and Python then installs no KeyboardInterrupt for it, so a supervisor's Ctrl-C
    or `kill -INT` would do nothing."""
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in handlers:
        signal.signal(sig, _raise_interrupt)
    return handlers


def run_platform(settings: Settings, users: int = DEFAULT_USERS, seconds: float | None = None,
                 cluster: bool = False) -> int:
    """Run until Ctrl-C, SIGTERM or `seconds`; returns the exit status. `cluster`: the Spark
    applications run on a standalone cluster the platform starts and stops."""
    from spark_jobs.local.platform_cluster import on_cluster

    settings = platform_settings(on_cluster(settings) if cluster else settings)
    handlers = stop_on_signals()
    stack = ExitStack()
    try:
        return _start_and_wait(settings, users, seconds, stack, cluster)
    except KeyboardInterrupt:
        return 0
    except AirflowStartError as exc:
        print(f"tideline: Airflow did not start: {exc}", file=sys.stderr)
        return 1
    except (DashboardStartError, ClusterError) as exc:
        print(f"tideline: {exc}", file=sys.stderr)
        return 1
    finally:
        step("stopping")  # when it failed while starting, the display is still open
        print("\nstopping ...", flush=True)
        for sig in handlers:  # a second Ctrl-C must not cut the clean-up short
            signal.signal(sig, signal.SIG_IGN)
        try:
            stack.close()
        finally:
            for sig, handler in handlers.items():
                signal.signal(sig, handler)


def _start_and_wait(settings: Settings, users: int, seconds: float | None, stack: ExitStack,
                    cluster: bool = False) -> int:
    """Start everything, registering each stop on `stack` as soon as its start is under way.

    The jobs, the dashboard and the traffic start before Airflow, the slowest to start, so
    that results come while it does. The stack unwinds in reverse: Airflow, traffic,
    dashboard, streaming jobs, cluster, broker. Jobs stop after Airflow so that the
    streaming_jobs DAG cannot start them again.
    """
    from spark_jobs.experiments.admin.snapshot import publish_for_run
    from spark_jobs.experiments.traffic import start_live_traffic
    from spark_jobs.local.broker import EmbeddedBroker

    starting = stack.enter_context(showing("platform start"))  # closed once it is up
    if uses_embedded_broker(settings):
        step("embedded broker")
        broker = EmbeddedBroker(port=EMBEDDED_BROKER_PORT, bind=settings.kafka.broker_bind)
        stack.callback(_report_stopped, "broker")
        stack.callback(broker.stop)
        broker.start()
        print(f"embedded broker on {broker.bootstrap}", flush=True)
        cleared = forget_previous_broker(settings)
        if cleared:
            print(f"new empty broker: cleared the checkpoints of {', '.join(cleared)}", flush=True)
    if cluster:
        from spark_jobs.local.platform_cluster import start_platform_cluster

        step("Spark standalone cluster")
        start_platform_cluster(settings, stack)
    stack.callback(_stop_streaming_jobs, settings)

    step("ramps and snapshot")
    now_ms = int(time.time() * 1000)
    spec = traffic_spec(settings, users, now_ms)
    loaded = load_demo_ramps(settings, spec)
    if loaded:
        print(f"loaded {loaded} demo ramp rows into {settings.metadata.url}", flush=True)
    path, _ = publish_for_run(settings, now_ms)
    print(f"published ramp snapshot {path.name}", flush=True)

    step("streaming jobs")
    deploy_streaming_jobs(settings)
    step("dashboard")
    dashboard = DashboardServer(settings)
    stack.callback(_report_stopped, "dashboard")
    stack.callback(dashboard.stop)
    dashboard.start()

    step("traffic")
    rate = realtime_rate(spec)
    stop = threading.Event()
    generator = start_live_traffic(spec, settings, rate, stop, live_start_ms(spec))
    stack.callback(_report_stopped, "traffic")
    stack.callback(generator.join, 30)
    stack.callback(stop.set)

    airflow, access = start_airflow(settings, stack)
    starting.close()
    lag_min = int(EVENT_TIME_LAG.total_seconds() // 60)
    spark_line = (f"  Spark      : {settings.spark.master} (master UI "
                  f"{settings.cluster.master_ui})\n") if cluster else ""
    print(
        "\nTideline is running.\n"
        f"  Airflow UI : {access.url}\n"
        f"  user       : {access.user}\n"
        f"  password   : {access.password}\n"
        f"  dashboard  : {dashboard.url}\n"
        f"{spark_line}"
        f"  traffic    : {rate:.0f} messages/s, event time {lag_min} min behind the clock\n"
        "The streaming jobs are starting; the streaming_jobs DAG watches them.\n"
        "Ctrl-C stops everything.\n",
        flush=True,
    )
    started = time.monotonic()
    while seconds is None or time.monotonic() - started < seconds:
        time.sleep(CHECK_EVERY_S)
        stopped = [name for name, alive in (("traffic generator", generator.is_alive()),
                                            ("Airflow", airflow.running())) if not alive]
        if stopped:
            print(f"tideline: the {stopped[0]} stopped unexpectedly", file=sys.stderr)
            return 1
    return 0
