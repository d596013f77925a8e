"""Progress of a running job where Airflow and a person can read it: one JSON file per job.

`<lake.root>/_progress/<job>.json` holds the latest StreamingQueryProgress (rows/s, batch
duration, watermark, state size) plus the time it was written; `<job>.jsonl` keeps history.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

from spark_jobs.settings import Settings
from spark_jobs.streaming.drops import add_batch, observed_counts, take_batch

HISTORY_MAX_BYTES = 20 << 20
IDLE_HEARTBEAT_S = 10.0


def progress_dir(settings: Settings) -> Path:
    return Path(settings.lake.root) / "_progress"


def read_progress(settings: Settings, job: str) -> dict[str, Any] | None:
    """The latest progress a job reported, or None if it never reported."""
    path = progress_dir(settings) / f"{job}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


class ProgressFileListener(StreamingQueryListener):
    """Writes each progress event of the named query atomically to its JSON file."""

    def __init__(self, settings: Settings, job: str, keep_history: bool = True) -> None:
        self.job = job
        self.folder = progress_dir(settings)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.keep_history = keep_history
        self.terminated = False
        self._last_idle_s = 0.0
        self._lock = threading.Lock()  # listener bus thread vs the runner's final write

    def _write(self, payload: dict[str, Any], history: bool = True) -> None:
        """Write unless the final status is already out: the listener bus delivers events
        late, and an idle heartbeat must not overwrite 'stopped'."""
        with self._lock:
            if not self.terminated:
                self._write_unlocked(payload, history)

    def _write_unlocked(self, payload: dict[str, Any], history: bool) -> None:
        payload["reported_at_ms"] = int(time.time() * 1000)
        text = json.dumps(payload)
        target = self.folder / f"{self.job}.json"
        temp = target.with_suffix(".json.tmp")
        temp.write_text(text)
        os.replace(temp, target)
        if self.keep_history and history:
            history_file = self.folder / f"{self.job}.jsonl"
            if history_file.exists() and history_file.stat().st_size > HISTORY_MAX_BYTES:
                os.replace(history_file, history_file.with_suffix(".jsonl.1"))  # keep one older
            with history_file.open("a") as out:
                out.write(text + "\n")

    def onQueryStarted(self, event: Any) -> None:
        if event.name != self.job:
            return
        self.run_id = str(event.runId)
        self._write({"status": "started", "id": str(event.id), "runId": self.run_id})

    def onQueryProgress(self, event: Any) -> None:
        if event.progress.name != self.job:
            return
        payload = json.loads(event.progress.json)
        payload["status"] = "running"
        self._count_drops(payload)
        self._write(payload)

    def _count_drops(self, payload: dict[str, Any]) -> None:
        """The batch's drop counts by reason, and the job's totals (streaming/drops.py)."""
        batch_id = payload.get("batchId")
        if not isinstance(batch_id, int):
            return
        counts = take_batch(self.job, batch_id) + observed_counts(payload)
        payload["drops"] = dict(counts)
        payload["drops_total"] = add_batch(self.folder, self.job, str(payload.get("id")),
                                           batch_id, counts)

    def onQueryIdle(self, event: Any) -> None:
        """A heartbeat (latest file only) so a monitor tells a quiet job from a hung one."""
        if str(event.runId) != getattr(self, "run_id", None):
            return
        now = time.monotonic()
        if now - self._last_idle_s >= IDLE_HEARTBEAT_S:
            self._last_idle_s = now
            self._write({"status": "idle", "id": str(event.id), "runId": self.run_id},
                        history=False)

    def onQueryTerminated(self, event: Any) -> None:
        if str(event.runId) != getattr(self, "run_id", None):
            return
        self.write_final(event.exception)

    def write_final(self, exception: str | None) -> None:
        """Record how the query ended (once); the runner calls it too, since a driver that
        exits right after `query.stop()` may never receive the listener's event."""
        with self._lock:
            if self.terminated:
                return
            self._write_unlocked({"status": "failed" if exception else "stopped",
                                  "exception": exception}, history=True)
            self.terminated = True
