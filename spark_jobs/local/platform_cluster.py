"""`tideline platform --cluster`: the platform's Spark applications on a standalone cluster.

The platform starts the cluster (section cluster) and every Spark application it causes
runs there: the streaming jobs the monitor deploys and the daily batch applications
(recomputation, rules and samples checks). They all get their Spark master from the
`spark.master` setting, through the settings file the platform freezes for Airflow (the
monitor's spark-submit and `submit_cli` read it), so the platform only changes settings:

- `spark.master` becomes the cluster's master URL (a different configured master is an
  error: the user asked for two places at once);
- each application takes one core (`spark.cores.max`, unless spark.conf says otherwise):
  without a cap the first streaming job would take every core and the others would wait for
  ever, since streaming applications never give their executors back;
- each worker offers enough cores and memory for every deployed job plus one batch
  application at a time (cores are slots the master hands out, not CPUs: on 2 CPUs the
  jobs share them as they do under `local[*]`);
- fraud_rules keeps its state in Spark (`fraud.state=spark`: shards on the executors, its
  state in the checkpoint) unless fraud.state was configured: the driver state is one
  process's memory, which a cluster exists to go beyond.
"""

from __future__ import annotations

import math
from contextlib import ExitStack
from typing import Any

from spark_jobs.config.fields import ConfigError
from spark_jobs.config.layers import DEFAULT
from spark_jobs.settings import Settings, build_settings, deep_merge

BATCH_SLOTS = 1  # the daily batch applications take turns on one core
EXECUTOR_MEMORY = "1g"  # Spark's default executor memory, said out loud
APPLICATION_CONF = {"spark.cores.max": "1", "spark.executor.cores": "1",
                    "spark.executor.memory": EXECUTOR_MEMORY}
CLUSTER_FRAUD_STATE = "spark"
_MB = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}


def configured(settings: Settings, key: str) -> bool:
    """Whether `section.key` was set by the user (a file, a variable), not left at default."""
    return any(source != DEFAULT for source in settings.sources.get(key, (DEFAULT,)))


def memory_mb(size: str) -> int:
    """A JVM memory size (`2g`, `512m`, `1gb`) in MB; ConfigError if it is not one."""
    text = str(size).strip().lower().removesuffix("b")
    if not (text[:-1].isdigit() and text[-1:] in _MB):
        raise ConfigError(f"{size!r} is not a memory size such as 1g or 512m")
    return math.ceil(int(text[:-1]) * _MB[text[-1]])


def _memory_text(mb: int) -> str:
    return f"{mb // 1024}g" if mb % 1024 == 0 else f"{mb}m"


def on_cluster(settings: Settings) -> Settings:
    """The settings of a platform whose Spark applications run on its standalone cluster."""
    cluster = settings.cluster
    if configured(settings, "spark.master") and settings.spark.master != cluster.master_url:
        raise ConfigError(
            f"--cluster runs the jobs on {cluster.master_url}, but spark.master is configured "
            f"as {settings.spark.master!r}: drop that setting, or run without --cluster")
    conf = {**{k: v for k, v in APPLICATION_CONF.items() if k not in settings.spark.conf},
            **settings.spark.conf}
    slots = len(settings.monitor.jobs) + BATCH_SLOTS
    cores = max(cluster.worker_cores, math.ceil(slots / cluster.workers))
    memory = max(memory_mb(cluster.worker_memory),
                 cores * memory_mb(str(conf["spark.executor.memory"])))
    changes: dict[str, Any] = {
        "spark": {"master": cluster.master_url, "conf": conf},
        "cluster": {"worker_cores": cores, "worker_memory": _memory_text(memory)},
    }
    if not configured(settings, "fraud.state"):
        changes["fraud"] = {"state": CLUSTER_FRAUD_STATE}
    return build_settings(deep_merge(settings.raw, changes), settings.sources)


def start_platform_cluster(settings: Settings, stack: ExitStack) -> None:
    """Start the master and workers; `stack` stops every daemon when it closes."""
    from spark_jobs.cluster.standalone import start_cluster, stop_cluster

    stack.callback(_stopped, settings)
    stack.callback(stop_cluster, settings.cluster)
    cluster = settings.cluster
    print(f"starting a Spark standalone cluster: {cluster.workers} workers of "
          f"{cluster.worker_cores} cores and {cluster.worker_memory} (home {cluster.home}) ...",
          flush=True)
    status = start_cluster(cluster)
    print("\n".join(status.lines()), flush=True)


def _stopped(settings: Settings) -> None:
    print(f"stopped the Spark cluster ({settings.cluster.master_url})", flush=True)
