"""spark-submit command lines for Tideline's entry points, against the configured master, and
running one as its own application (what Airflow tasks call).

Airflow (the monitor and the daily recomputation) launches Spark applications this way, so
the same command works with `local[*]`, a standalone cluster or Kubernetes: only
`spark.master` and `spark.conf` change.
"""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
import sys
import tempfile
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from spark_jobs.settings import ENV_PREFIX, Settings

ENTRY_POINT = Path(__file__).resolve().parents[1] / "__main__.py"


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
    """`spark-submit --master M --conf k=v ... spark_jobs/__main__.py <cli_args>` (the CLI)."""
    command = [spark_submit_path(), "--master", settings.spark.master, "--name", app_name]
    conf = {**QUIET_CONF, **settings.spark.conf}
    for key, value in sorted(conf.items()):
        command += ["--conf", f"{key}={value}"]
    return [*command, str(ENTRY_POINT), *cli_args]


def submit_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for a submitted application: our interpreter on both sides and the pip
    pyspark's SPARK_HOME (see `frozen_environment` for the settings it gets)."""
    env = dict(os.environ if base is None else base)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env.setdefault("SPARK_HOME", pyspark_home())
    bin_dir = str(Path(sys.executable).parent)
    if bin_dir not in env.get("PATH", "").split(os.pathsep):
        env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")])
    return env


def _plain(value: Any) -> Any:
    """YAML-safe values: tuples become lists, anything unusual its text."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str | datetime.date):
        return value
    return str(value)


def freeze_settings(settings: Settings, path: str | Path) -> Path:
    """Write the effective settings as a YAML file another process loads as TIDELINE_CONFIG.

    Settings built in code (the platform's compressed durations) exist in no file or
    variable, so child processes (Airflow tasks, spark-submit) get them this way. A local
    lake root becomes absolute (children need not share our working directory); the file is
    private (mode 0600) since kafka.client may hold credentials.
    """
    tree = _plain(settings.raw)
    root = str(tree["lake"]["root"])
    if "://" not in root:
        tree["lake"]["root"] = str(Path(root).resolve())
    file = Path(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(descriptor, "w") as out:
        yaml.safe_dump(tree, out, sort_keys=True)
    return file


def frozen_environment(config_path: str | Path, base: Mapping[str, str] | None = None
                       ) -> dict[str, str]:
    """submit_environment() whose only Tideline configuration is the frozen file: stray
    TIDELINE_* variables would otherwise override what the caller was given."""
    env = {k: v for k, v in submit_environment(base).items() if not k.startswith(ENV_PREFIX)}
    env["TIDELINE_CONFIG"] = str(Path(config_path).resolve())
    return env

LOG_TAIL_LINES = 40
ALERTED_EXIT = 3  # a command's exit status for "a check failed and its alert went out"


class SubmittedCommandFailed(RuntimeError):
    """A submitted `tideline` command exited non-zero; the message ends with its log tail.
    `already_alerted`: the command exits ALERTED_EXIT after alerting on a failed check, so
    the task's failure callback need not alert again (a crash exits 1)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.already_alerted = exit_code == ALERTED_EXIT


RecomputeFailed = SubmittedCommandFailed  # the name the recomputation's callers know


def alert_connections(settings: Settings) -> dict[str, str]:
    """The alert channels' Airflow connections as AIRFLOW_CONN_* variables: a submitted
    check alerts through the connections the task sees, which it cannot look up itself."""
    from spark_jobs.control.alerts.connections import forwarded_environment

    return forwarded_environment([settings.alerts.webhook_conn_id, settings.alerts.smtp_conn_id])


def submit_recompute(settings: Settings, day: datetime.date) -> None:
    """spark-submit `tideline recompute --date DAY`, echo its output, raise on failure."""
    submit_cli(settings, ["recompute", "--date", day.isoformat()],
               f"tideline-recompute-{day.isoformat()}", f"recomputation of {day.isoformat()}")


def submit_cli(settings: Settings, cli_args: list[str], app_name: str, what: str) -> None:
    """spark-submit `tideline CLI_ARGS` as its own application with exactly these settings,
    echo its output, raise SubmittedCommandFailed (with the log tail) on a non-zero exit."""
    with tempfile.TemporaryDirectory(prefix="tideline-submit-") as folder:
        config = freeze_settings(settings, Path(folder) / "tideline.yaml")
        command = spark_submit_command(settings, cli_args, app_name=app_name)
        tail: deque[str] = deque(maxlen=LOG_TAIL_LINES)
        with subprocess.Popen(
            command, env={**frozen_environment(config), **alert_connections(settings)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, errors="replace",
        ) as process:
            assert process.stdout is not None
            for line in process.stdout:
                sys.stdout.write(line)
                tail.append(line.rstrip("\n"))
            code = process.wait()
    sys.stdout.flush()
    if code != 0:
        log = "\n".join(tail) or "(no output)"
        raise SubmittedCommandFailed(
            f"{what} failed (spark-submit exit {code}); last {len(tail)} lines:\n{log}", code
        )
