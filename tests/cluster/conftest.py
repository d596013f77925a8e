"""A real Spark standalone cluster (master + 2 workers of 1 core) for the cluster tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from spark_jobs.cluster.settings import ClusterSettings
from spark_jobs.cluster.standalone import start_cluster, stop_cluster
from spark_jobs.local.broker import free_port
from spark_jobs.settings import load_settings


def cluster_settings(home: Path) -> ClusterSettings:
    """Free ports, a private home, 2 workers of 1 core and 1 GB."""
    ports = {key: free_port() for key in ("master_port", "master_ui_port", "worker_ui_port",
                                          "history_port")}
    return load_settings(environ={}, overrides={"cluster": {
        **ports, "home": str(home), "workers": 2, "worker_cores": 1, "worker_memory": "1g",
    }}).cluster


def session_processes(home: Path) -> list[psutil.Process]:
    """Live processes started from the cluster's home (daemons run in it; workers and
    executors also name it on their command lines)."""
    found = []
    for process in psutil.process_iter(["cmdline", "cwd"]):
        try:
            if (str(process.info["cwd"] or "").startswith(str(home))
                    or any(str(home) in part for part in process.info["cmdline"] or ())):
                found.append(process)
        except psutil.Error:
            continue
    return [p for p in found if p.pid != os.getpid()]


@pytest.fixture(scope="session")
def standalone_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterSettings]:
    cluster = cluster_settings(tmp_path_factory.mktemp("cluster"))
    try:
        start_cluster(cluster)
        yield cluster
    finally:
        stop_cluster(cluster)
