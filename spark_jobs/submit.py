"""spark-submit command lines for Tideline's entry points, against the configured master.

Airflow (the monitor and the daily recomputation) launches Spark applications this way, so
the same command works with `local[*]`, a standalone cluster or Kubernetes: only
`spark.master` and `spark.conf` change.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from spark_jobs.config import Settings

ENTRY_POINT = Path(__file__).resolve().parent / "entry" / "tideline_main.py"


# Spark's start-up INFO lines would bury the job's own output in Airflow task logs.
QUIET_CONF = {"spark.log.level": "WARN"}


class SparkSubmitMissingError(FileNotFoundError):
    """No spark-submit next to this interpreter nor on PATH."""


def spark_submit_path() -> str:
    """The spark-submit of the venv running us (pip pyspark ships it), else the one on PATH."""
    beside = Path(sys.executable).parent / "spark-submit"
    if beside.exists():
        return str(beside)
    found = shutil.which("spark-submit")
    if found is None:
        raise SparkSubmitMissingError(
            "spark-submit not found: install pyspark in this environment or put SPARK_HOME/bin "
            "on PATH"
        )
    return found


def pyspark_home() -> str:
    """SPARK_HOME of the pip pyspark (its bin/ scripts otherwise guess with `python3`)."""
    import pyspark

    return str(Path(pyspark.__file__).resolve().parent)


def spark_submit_command(settings: Settings, cli_args: Sequence[str], app_name: str) -> list[str]:
    """`spark-submit --master M --conf k=v ... tideline_main.py <cli_args>` (the tideline CLI)."""
    command = [spark_submit_path(), "--master", settings.spark.master, "--name", app_name]
    conf = {**QUIET_CONF, **settings.spark.conf}
    for key, value in sorted(conf.items()):
        command += ["--conf", f"{key}={value}"]
    return [*command, str(ENTRY_POINT), *cli_args]


def submit_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for a submitted application: our interpreter on both sides, our config.

    TIDELINE_* variables pass through unchanged, so the application sees the same settings
    as the process that submitted it.
    """
    env = dict(os.environ if base is None else base)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env.setdefault("SPARK_HOME", pyspark_home())
    bin_dir = str(Path(sys.executable).parent)
    if bin_dir not in env.get("PATH", "").split(os.pathsep):
        env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")])
    return env
