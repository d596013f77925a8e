"""Start, stop and read a Spark standalone cluster: one master and N workers on this machine.

The master's JSON status (`<master UI>/json/`) is the truth about the cluster (workers alive,
applications running); the pid files say which processes Tideline started and must stop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from spark_jobs.cluster.daemons import (
    DaemonRecord,
    daemon_environment,
    process_of,
    read_record,
    recorded_names,
    start_daemon,
    stop_daemon,
    wait_until,
)
from spark_jobs.cluster.settings import ClusterSettings
from spark_jobs.config.network import port_in_use

MASTER = "master"
HISTORY = "history"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
HISTORY_CLASS = "org.apache.spark.deploy.history.HistoryServer"
READY_TIMEOUT_S = 90.0


class ClusterError(RuntimeError):
    """The cluster could not start (the message says what to fix, with a log's tail)."""


def worker_name(index: int) -> str:
    return f"worker-{index}"


def _log_tail(path: str, lines: int = 15) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def master_status(cluster: ClusterSettings, timeout_s: float = 2.0) -> dict[str, Any] | None:
    """The master's JSON status, or None when no master answers."""
    try:
        response = httpx.get(f"{cluster.master_ui}/json/", timeout=timeout_s)
        response.raise_for_status()
        return dict(response.json())
    except (httpx.HTTPError, ValueError):
        return None


def alive_workers(status: dict[str, Any] | None) -> list[dict[str, Any]]:
    return [w for w in (status or {}).get("workers", []) if w.get("state") == "ALIVE"]


@dataclass
class ClusterStatus:
    """What `tideline cluster status` reports."""

    master_url: str
    master_ui: str
    daemons: dict[str, bool] = field(default_factory=dict)  # name -> its process is alive
    master: dict[str, Any] | None = None  # the master's JSON status

    @property
    def up(self) -> bool:
        return self.master is not None and self.master.get("status") == "ALIVE"

    def lines(self) -> list[str]:
        found = [f"master {self.master_url} (UI {self.master_ui}): "
                 + ("ALIVE" if self.up else "not answering")]
        for name, alive in self.daemons.items():
            found.append(f"  {name}: {'running' if alive else 'not running'}")
        for worker in (self.master or {}).get("workers", []):
            found.append(f"  worker {worker['id']}: {worker['state']}, {worker['coresused']}/"
                         f"{worker['cores']} cores, {worker['memoryused']}/{worker['memory']} "
                         f"MB used, UI {worker['webuiaddress']}")
        for app in (self.master or {}).get("activeapps", []):
            found.append(f"  application {app['id']} {app['name']}: {app['state']}, "
                         f"{app['cores']} cores")
        return found


def cluster_status(cluster: ClusterSettings) -> ClusterStatus:
    home = Path(cluster.home)
    daemons = {}
    for name in recorded_names(home):
        record = read_record(home, name)
        daemons[name] = record is not None and process_of(record) is not None
    return ClusterStatus(cluster.master_url, cluster.master_ui, daemons, master_status(cluster))


def _running(home: Path, name: str) -> DaemonRecord | None:
    record = read_record(home, name)
    return record if record is not None and process_of(record) is not None else None


def start_master(cluster: ClusterSettings) -> DaemonRecord:
    home = Path(cluster.home)
    running = _running(home, MASTER)
    if running is not None:
        return running
    for port, key in ((cluster.master_port, "master_port"),
                      (cluster.master_ui_port, "master_ui_port")):
        if port_in_use(cluster.host, port):
            raise ClusterError(f"port {port} on {cluster.host} is in use: stop what holds it "
                               f"or set cluster.{key} (TIDELINE_CLUSTER__{key.upper()})")
    record = start_daemon(home, MASTER, MASTER_CLASS, [
        "--host", cluster.host, "--port", str(cluster.master_port),
        "--webui-port", str(cluster.master_ui_port)], daemon_environment())
    wait_until(lambda: master_status(cluster) is not None or process_of(record) is None,
               READY_TIMEOUT_S)
    if master_status(cluster) is None:
        stop_daemon(home, MASTER)
        raise ClusterError(f"the Spark master did not start; its log ({record.log}) ends:\n"
                           f"{_log_tail(record.log)}")
    return record


def start_worker(cluster: ClusterSettings, index: int) -> DaemonRecord:
    """Start worker `index` (1-based), registered with the master; returns once it runs."""
    home = Path(cluster.home)
    name = worker_name(index)
    running = _running(home, name)
    if running is not None:
        return running
    work = home / "work" / name
    work.mkdir(parents=True, exist_ok=True)
    return start_daemon(home, name, WORKER_CLASS, [
        "--host", cluster.host, "--cores", str(cluster.worker_cores),
        "--memory", cluster.worker_memory,
        "--webui-port", str(cluster.worker_ui_port + index - 1),
        "--work-dir", str(work), cluster.master_url], daemon_environment())


def wait_for_workers(cluster: ClusterSettings, count: int,
                     timeout_s: float = READY_TIMEOUT_S) -> None:
    """Return once the master has `count` workers alive."""
    if wait_until(lambda: len(alive_workers(master_status(cluster))) >= count, timeout_s):
        return
    home = Path(cluster.home)
    logs = [f"{name}: {_log_tail(record.log, 5)}" for name in recorded_names(home)
            if name.startswith("worker") and (record := read_record(home, name))]
    raise ClusterError(f"{len(alive_workers(master_status(cluster)))} of {count} workers "
                       f"registered with {cluster.master_url} after {timeout_s:.0f} s; "
                       "worker logs end:\n" + "\n".join(logs))


def start_cluster(cluster: ClusterSettings, workers: int | None = None) -> ClusterStatus:
    """The master and `workers` workers (default cluster.workers), all registered."""
    count = workers or cluster.workers
    start_master(cluster)
    for index in range(1, count + 1):
        start_worker(cluster, index)
    wait_for_workers(cluster, count)
    return cluster_status(cluster)


def start_history(cluster: ClusterSettings, event_log_dir: str) -> DaemonRecord:
    """Spark's history server over the applications' event logs (`event_log_dir`)."""
    home = Path(cluster.home)
    running = _running(home, HISTORY)
    if running is not None:
        return running
    if port_in_use(cluster.host, cluster.history_port):
        raise ClusterError(f"port {cluster.history_port} on {cluster.host} is in use: stop "
                           "what holds it or set cluster.history_port")
    Path(event_log_dir).mkdir(parents=True, exist_ok=True)
    options = (f"-Dspark.history.fs.logDirectory={event_log_dir} "
               f"-Dspark.history.ui.port={cluster.history_port} "
               f"-Dspark.history.fs.update.interval=2s")
    record = start_daemon(home, HISTORY, HISTORY_CLASS, [],
                          daemon_environment({"SPARK_HISTORY_OPTS": options}))
    if not wait_until(lambda: port_in_use(cluster.host, cluster.history_port)
                      or process_of(record) is None, READY_TIMEOUT_S) or (
            process_of(record) is None):
        stop_daemon(home, HISTORY)
        raise ClusterError(f"the history server did not start; its log ({record.log}) ends:\n"
                           f"{_log_tail(record.log)}")
    return record


def stop_cluster(cluster: ClusterSettings) -> list[str]:
    """Stop every daemon Tideline started for this cluster (workers first); their names."""
    home = Path(cluster.home)
    names = recorded_names(home)
    order = [n for n in names if n.startswith("worker")] + [n for n in names
                                                             if not n.startswith("worker")]
    return [name for name in order if stop_daemon(home, name)]
