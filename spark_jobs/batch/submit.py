"""Run a day's recomputation as its own Spark application (what the Airflow task calls).

A separate application keeps the scheduler process free of a JVM and runs unchanged on a
cluster: only `spark.master` and `spark.conf` decide where. The caller's settings are
handed over as a YAML file (TIDELINE_CONFIG) so the application sees exactly them, however
the caller built them.
"""

from __future__ import annotations

import datetime
import subprocess
import sys
import tempfile
from collections import deque
from pathlib import Path

from spark_jobs.config import Settings
from spark_jobs.submit import freeze_settings, frozen_environment, spark_submit_command

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
            command, env=frozen_environment(config), stdout=subprocess.PIPE,
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
