"""`tideline platform --cluster`: the settings every Spark application of the platform gets
(master, one core each, workers sized for the jobs, fraud_rules' state), the flag, and what
a deployed job's spark-submit and frozen settings carry (on a real cluster:
tests/cluster/test_platform_on_cluster.py)."""

from __future__ import annotations

import pytest

from spark_jobs.cli import build_parser
from spark_jobs.config.fields import ConfigError
from spark_jobs.control.monitor.supervisor import _job_environment
from spark_jobs.control.submit import spark_submit_command
from spark_jobs.control.ui.spark_apps import spark_section
from spark_jobs.local.platform_cluster import memory_mb, on_cluster
from spark_jobs.local.platform_stack import platform_settings
from spark_jobs.settings import load_settings

FREE = {"master_port": 17077, "master_ui_port": 18088}  # nothing answers there in unit tests


def settings_of(tmp_path, environ=None, **sections):
    overrides = {"lake": {"root": str(tmp_path / "lake")},
                 "airflow": {"home": str(tmp_path / "airflow")},
                 "cluster": FREE, **sections}
    return load_settings(environ=environ or {}, overrides=overrides)


def test_the_flag_is_parsed():
    parser = build_parser()
    assert parser.parse_args(["platform", "--cluster"]).cluster is True
    assert parser.parse_args(["platform"]).cluster is False


def test_every_application_goes_to_the_cluster_with_one_core(tmp_path):
    settings = on_cluster(settings_of(tmp_path))
    assert settings.spark.master == "spark://127.0.0.1:17077"
    assert settings.spark.conf == {"spark.cores.max": "1", "spark.executor.cores": "1",
                                   "spark.executor.memory": "1g"}
    # 3 deployed jobs + 1 batch application on 2 workers: 2 cores and 2 x 1g each
    assert (settings.cluster.workers, settings.cluster.worker_cores) == (2, 2)
    assert settings.cluster.worker_memory == "2g"


def test_the_deployed_job_and_the_recomputation_carry_the_master(tmp_path):
    """The monitor's spark-submit names the master; the settings file it freezes for the job
    (and the platform for Airflow's tasks) says it again, with the cluster's ports."""
    settings = platform_settings(on_cluster(settings_of(tmp_path)))
    command = spark_submit_command(settings, ["job", "run", "filter_events"], "tideline-x")
    assert command[command.index("--master") + 1] == "spark://127.0.0.1:17077"
    assert "spark.cores.max=1" in command
    env = _job_environment(settings, "filter_events")
    assert not any(k.startswith("TIDELINE_") and k != "TIDELINE_CONFIG" for k in env)
    frozen = load_settings(environ={"TIDELINE_CONFIG": env["TIDELINE_CONFIG"]})
    assert frozen.spark.master == "spark://127.0.0.1:17077"
    assert frozen.cluster.master_ui == "http://127.0.0.1:18088"
    recompute = spark_submit_command(frozen, ["recompute", "--date", "2026-01-01"], "r")
    assert recompute[recompute.index("--master") + 1] == "spark://127.0.0.1:17077"


def test_fraud_rules_runs_its_spark_state_unless_configured(tmp_path):
    assert on_cluster(settings_of(tmp_path)).fraud.state == "spark"
    chosen = settings_of(tmp_path, environ={"TIDELINE_FRAUD__STATE": "driver"})
    assert on_cluster(chosen).fraud.state == "driver"  # configured, even to the default
    assert settings_of(tmp_path).fraud.state == "driver"  # without --cluster: unchanged


def test_workers_grow_with_the_deployed_jobs_and_configured_conf_is_kept(tmp_path):
    five = on_cluster(settings_of(
        tmp_path, monitor={"jobs": ["filter_events", "filter_activations", "experiment_metrics",
                                    "fraud_rules", "training_samples"]},
        spark={"conf": {"spark.executor.memory": "512m", "spark.cores.max": "2"}},
        cluster={**FREE, "worker_memory": "1g"}))
    assert five.cluster.worker_cores == 3  # ceil(6 / 2)
    assert five.cluster.worker_memory == "1536m"  # 3 x 512m
    assert five.spark.conf["spark.cores.max"] == "2"
    big = on_cluster(settings_of(tmp_path, cluster={**FREE, "worker_cores": 4,
                                                    "worker_memory": "8g"}))
    assert (big.cluster.worker_cores, big.cluster.worker_memory) == (4, "8g")


def test_a_different_configured_master_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"spark\.master is configured as 'local\[2\]'"):
        on_cluster(settings_of(tmp_path, spark={"master": "local[2]"}))
    same = settings_of(tmp_path, spark={"master": "spark://127.0.0.1:17077"})
    assert on_cluster(same).spark.master == "spark://127.0.0.1:17077"


def test_memory_sizes():
    assert [memory_mb(s) for s in ("2g", "512m", "1gb", "2048k", "1t")] == [
        2048, 512, 1024, 2, 1024 * 1024]
    with pytest.raises(ConfigError, match="memory size"):
        memory_mb("lots")


def test_the_jobs_page_links_the_master_ui(tmp_path):
    html = spark_section(on_cluster(settings_of(tmp_path)), ["filter_events"])
    assert "Master spark://127.0.0.1:17077" in html
    assert "href='http://127.0.0.1:18088'" in html and "not answering" in html

