"""Where the monitor keeps its small state files, and how they are written safely.

Everything lives under `<lake.root>/_run` (pid files, restart history, alert memory, the
settings a job was started with) and `<lake.root>/_logs` (each job's stdout and stderr),
next to `_progress`, so any process with the same settings finds them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from spark_jobs.settings import Settings


def run_dir(settings: Settings) -> Path:
    """Folder of the monitor's state files."""
    return Path(settings.lake.root) / "_run"


def log_dir(settings: Settings) -> Path:
    """Folder of the jobs' log files."""
    return Path(settings.lake.root) / "_logs"


def write_json(path: Path, value: Any, mode: int = 0o644) -> None:
    """Write JSON atomically (temp file + rename): a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "w") as out:
        json.dump(value, out)
    os.replace(temp, path)


def read_json(path: Path) -> Any | None:
    """The JSON value of `path`, or None when it is missing or not valid JSON."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
