"""The monitor of `tideline platform --cluster` deploys a streaming job on a real standalone
cluster: the master's JSON status lists its application running on one core, and a stop
leaves nothing (the settings alone: tests/local/test_platform_cluster.py; the whole platform
on a cluster was run by hand, since the suite has no time for a second platform run)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable

import pytest

from spark_jobs.cluster.settings import ClusterSettings
from spark_jobs.cluster.standalone import master_status
from spark_jobs.control.monitor import stop_all_jobs, watch_job
from spark_jobs.control.monitor.processes import session_members
from spark_jobs.local.platform_cluster import on_cluster
from spark_jobs.streaming.application import read_application

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.kafka]

JOB = "filter_events"
APP = f"tideline-{JOB}"
CLUSTER_KEYS = ("host", "master_port", "master_ui_port", "worker_ui_port", "history_port",
                "home", "workers", "worker_cores", "worker_memory")


def wait(condition: Callable[[], bool], timeout_s: float, what: str, log: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            with contextlib.suppress(OSError), open(log) as handle:
                what += "\n" + "".join(handle.readlines()[-40:])
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.5)


def apps(cluster: ClusterSettings, kind: str) -> dict[str, tuple[str, str, int]]:
    """Application id -> (name, state, cores), of the master's active or completed ones."""
    return {app["id"]: (app["name"], app["state"], app["cores"])
            for app in (master_status(cluster) or {}).get(kind, [])}


def running_on_master(settings, cluster: ClusterSettings) -> bool:
    app = read_application(settings, JOB)
    return app is not None and apps(cluster, "activeapps").get(app["app_id"], ("",))[1:2] == (
        "RUNNING",)


def test_the_monitor_deploys_a_job_on_the_cluster(standalone_cluster, own_broker, make_settings):
    settings = on_cluster(make_settings(
        own_broker, cluster={key: getattr(standalone_cluster, key) for key in CLUSTER_KEYS},
        experiments={"period": "40m", "window": "5m", "lateness": "1m", "dedup_ttl": "1m"},
        jobs={"trigger": "500ms"}, monitor={"stop_timeout": "20s"}))
    assert settings.spark.master == standalone_cluster.master_url
    log = f"{settings.lake.root}/_logs/{JOB}.log"
    pid = None
    try:
        started = watch_job(settings, JOB)
        assert (started["state"], started["problems"]) == ("started", []), started
        pid = started["pid"]
        wait(lambda: running_on_master(settings, standalone_cluster), 240,
             "the master to list the job's application running", log)
        app = read_application(settings, JOB)
        assert app is not None and app["master"] == standalone_cluster.master_url
        assert apps(standalone_cluster, "activeapps")[app["app_id"]] == (APP, "RUNNING", 1)
        assert stop_all_jobs(settings) == [JOB]
        assert not [p for p in session_members(pid) if p.alive], "a process was left behind"
        wait(lambda: app["app_id"] not in apps(standalone_cluster, "activeapps"), 60,
             "the master to see the application end", log)
        assert apps(standalone_cluster, "completedapps")[app["app_id"]][:2] == (APP, "FINISHED")
    finally:
        stop_all_jobs(settings)
        if pid is not None:
            for process in session_members(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGKILL)
