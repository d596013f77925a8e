"""`tideline cluster`: a real master and workers, a job on them, and nothing left behind
(a lost worker: tests/cluster/test_cluster_pipeline.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spark_jobs.cluster.settings import ClusterSettings
from spark_jobs.cluster.standalone import (
    alive_workers,
    cluster_status,
    master_status,
    start_cluster,
    stop_cluster,
)
from tests.cluster.conftest import cluster_settings, session_processes

pytestmark = pytest.mark.integration

DRIVER = """
import json, sys
import pandas as pd
from pyspark.sql.functions import pandas_udf
from spark_jobs.settings import load_settings
from spark_jobs.streaming.spark_session import build_session

spark = build_session(load_settings(overrides={"spark": {"master": sys.argv[1]}}),
                      app_name="tideline-cluster-test")

@pandas_udf("long")
def doubled(values: pd.Series) -> pd.Series:
    return values * 2

rows = spark.range(0, 1000, numPartitions=4).select(doubled("id").alias("x"))
total = rows.groupBy().sum("x").collect()[0][0]
executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
print(json.dumps({"total": total, "executors": executors}))
spark.stop()
"""


def run_driver(cluster: ClusterSettings) -> dict[str, int]:
    environment = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run([sys.executable, "-c", DRIVER, cluster.master_url], text=True,
                          capture_output=True, timeout=240, env=environment, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_job_runs_on_two_workers(standalone_cluster: ClusterSettings) -> None:
    status = cluster_status(standalone_cluster)
    assert status.up and status.daemons == {"master": True, "worker-1": True, "worker-2": True}
    assert len(alive_workers(status.master)) == 2
    assert run_driver(standalone_cluster) == {"total": 999_000, "executors": 2}
    completed = master_status(standalone_cluster)["completedapps"]
    assert "tideline-cluster-test" in [app["name"] for app in completed]


def test_stop_leaves_no_process(tmp_path: Path) -> None:
    cluster = cluster_settings(tmp_path / "own")
    start_cluster(cluster, workers=1)
    assert session_processes(tmp_path / "own")
    assert set(stop_cluster(cluster)) == {"master", "worker-1"}
    assert session_processes(tmp_path / "own") == []
    assert master_status(cluster) is None
    assert stop_cluster(cluster) == []
