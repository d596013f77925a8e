"""Section cluster: what `tideline cluster` reads, and what a wrong value says."""

from __future__ import annotations

import pytest

from spark_jobs.cluster.daemons import DaemonRecord
from spark_jobs.cluster.standalone import ClusterStatus, alive_workers
from spark_jobs.settings import ConfigError, load_settings


def test_defaults_derive_home_from_the_lake() -> None:
    settings = load_settings(environ={}, overrides={"lake": {"root": "/data/lake/"}})
    cluster = settings.cluster
    assert cluster.home == "/data/lake/_cluster"
    assert cluster.master_url == "spark://127.0.0.1:7077"
    assert cluster.master_ui == "http://127.0.0.1:8088"
    assert (cluster.workers, cluster.worker_cores, cluster.worker_memory) == (2, 1, "2g")


def test_worker_memory_needs_a_unit() -> None:
    with pytest.raises(ConfigError, match=r"cluster\.worker_memory must be a number with a unit"):
        load_settings(environ={}, overrides={"cluster": {"worker_memory": "2048"}})


def test_environment_sets_the_workers() -> None:
    settings = load_settings(environ={"TIDELINE_CLUSTER__WORKERS": "3"})
    assert settings.cluster.workers == 3


def test_a_damaged_pid_file_is_no_record() -> None:
    assert DaemonRecord.from_json({"name": "master", "pid": "x"}) is None
    record = DaemonRecord.from_json({"name": "master", "pid": 12, "create_time": 1.5,
                                     "command": ["spark-class"], "log": "/l"})
    assert record == DaemonRecord("master", 12, 1.5, ("spark-class",), "/l")


def test_status_lines_come_from_the_masters_json() -> None:
    master = {"status": "ALIVE", "workers": [
        {"id": "w1", "state": "ALIVE", "cores": 1, "coresused": 1, "memory": 2048,
         "memoryused": 1024, "webuiaddress": "http://127.0.0.1:8091"},
        {"id": "w2", "state": "DEAD", "cores": 1, "coresused": 0, "memory": 2048,
         "memoryused": 0, "webuiaddress": "http://127.0.0.1:8092"}],
        "activeapps": [{"id": "app-1", "name": "tideline-fraud_rules", "state": "RUNNING",
                        "cores": 1}]}
    status = ClusterStatus("spark://127.0.0.1:7077", "http://127.0.0.1:8088",
                           {"master": True, "worker-1": True}, master)
    assert status.up
    text = "\n".join(status.lines())
    assert "worker w2: DEAD" in text and "application app-1 tideline-fraud_rules" in text
    assert [w["id"] for w in alive_workers(master)] == ["w1"]
    assert not ClusterStatus("u", "ui", {}, None).up
