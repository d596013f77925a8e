"""Which Spark application runs a job, and where its UI is: `<lake.root>/_progress/<job>.app.json`.

The job writes it when its session starts, so the control plane can link each job to its
Spark UI and look the application up in a standalone master's status.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from spark_jobs.settings import Settings
from spark_jobs.streaming.progress import progress_dir


def application_path(settings: Settings, job: str) -> Any:
    return progress_dir(settings) / f"{job}.app.json"


def write_application(settings: Settings, job: str, spark: Any) -> dict[str, Any]:
    """Record the running session's application id, master and UI address."""
    context = spark.sparkContext
    record = {"job": job, "app_id": context.applicationId, "app_name": context.appName,
              "master": context.master, "ui": context.uiWebUrl, "pid": os.getpid(),
              "started_at_ms": int(time.time() * 1000)}
    path = application_path(settings, job)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temp.write_text(json.dumps(record))
    os.replace(temp, path)
    return record


def read_application(settings: Settings, job: str) -> dict[str, Any] | None:
    """The job's last recorded application, or None when it never started one."""
    try:
        return dict(json.loads(application_path(settings, job).read_text()))
    except (OSError, ValueError, TypeError):
        return None
