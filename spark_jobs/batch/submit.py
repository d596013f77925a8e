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


class RecomputeFailed(RuntimeError):
    """The submitted recomputation exited non-zero; the message ends with its log tail."""


def submit_recompute(settings: Settings, day: datetime.date) -> None:
    """spark-submit `tideline recompute --date DAY`, echo its output, raise on failure."""
    with tempfile.TemporaryDirectory(prefix="tideline-recompute-") as folder:
        config = freeze_settings(settings, Path(folder) / "tideline.yaml")
        command = spark_submit_command(
            settings, ["recompute", "--date", day.isoformat()],
            app_name=f"tideline-recompute-{day.isoformat()}",
        )
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
        raise RecomputeFailed(
            f"recomputation of {day.isoformat()} failed (spark-submit exit {code}); "
            f"last {len(tail)} lines:\n{log}"
        )
