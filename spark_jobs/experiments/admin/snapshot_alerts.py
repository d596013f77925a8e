"""Alerts about ramp snapshots (CONTRACTS.md section 9): a publication refused, a snapshot
in use that has gone stale.

A stale snapshot means the publisher stopped: new ramps never reach filter_activations and
activations of new periods are dropped. The job alerts once per stale snapshot (an
episode ends when a newer snapshot is loaded), not once per micro-batch nor once per
restart: the snapshot last alerted is kept in `<lake.root>/_run/<job>.stale_snapshot.json`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from spark_jobs.control.alerts import Alert, send_alert
from spark_jobs.control.alerts.model import iso_utc
from spark_jobs.control.monitor.state_files import read_json, run_dir, write_json
from spark_jobs.experiments.admin.snapshot import snapshot_published_ms
from spark_jobs.settings import Settings

log = logging.getLogger(__name__)

STALE_INTERVALS = 3  # a snapshot older than this many publish intervals is stale
PUBLISH_SOURCE = "ramp_snapshot"
ALERTS_LOGGER = "tideline.alerts"  # spark_jobs.control.alerts.dispatch's log line


def refused_alert(reason: BaseException, as_of_ms: int) -> Alert:
    """The alert of a publication that failed instead of publishing an empty snapshot."""
    return Alert(
        source=PUBLISH_SOURCE,
        kind="snapshot_refused",
        summary=str(reason).splitlines()[0][:500],
        details={"as_of_ms": as_of_ms, "error": type(reason).__name__},
    )


def try_send(settings: Settings, alert: Alert, log_line: bool = True) -> bool:
    """Send an alert; a failure to send is logged, never raised (the caller's own failure,
    or its job, matters more). `log_line=False`: the caller prints the failure itself (the
    CLI's one line), so the alert's own log line is left out."""
    dispatch_log = logging.getLogger(ALERTS_LOGGER)
    was_disabled = dispatch_log.disabled
    dispatch_log.disabled = was_disabled or not log_line
    try:
        send_alert(settings, alert)
    except Exception as exc:  # any sink failure
        log.error("could not send the %s alert: %s", alert.kind, exc)
        return False
    finally:
        dispatch_log.disabled = was_disabled
    return True


class StaleSnapshotAlarm:
    """Alerts when the snapshot a job uses was published more than STALE_INTERVALS publish
    intervals (`experiments.snapshot_interval`) ago; once per snapshot file."""

    def __init__(self, settings: Settings, job: str,
                 clock: Callable[[], float] = time.time,
                 send: Callable[[Settings, Alert], object] = try_send) -> None:
        self.settings = settings
        self.job = job
        self.max_age_ms = STALE_INTERVALS * settings.experiments.snapshot_interval_ms
        self._clock = clock
        self._send = send
        self._memory = run_dir(settings) / f"{job}.stale_snapshot.json"
        self._alerted: str | None = None
        self._loaded = False

    def check(self, path: Path | None) -> Alert | None:
        """The alert sent now for `path` (the snapshot in use), or None."""
        if path is None:
            return None
        published_ms = snapshot_published_ms(path)
        age_ms = int(self._clock() * 1000) - published_ms
        if age_ms <= self.max_age_ms or path.name == self._last_alerted():
            return None
        alert = Alert(
            source=self.job,
            kind="snapshot_stale",
            summary=(
                f"{self.job} uses ramp snapshot {path.name}, published {iso_utc(published_ms)}: "
                f"older than {STALE_INTERVALS} publish intervals "
                "(experiments.snapshot_interval); is the ramp_snapshot DAG running?"
            ),
            metric="snapshot_age_s",
            observed=age_ms / 1000,
            threshold=self.max_age_ms / 1000,
            details={"snapshot": str(path), "published_ms": published_ms},
        )
        self._send(self.settings, alert)
        self._alerted = path.name
        write_json(self._memory, {"snapshot": path.name})
        return alert

    def _last_alerted(self) -> str | None:
        if not self._loaded:
            remembered = read_json(self._memory)
            if isinstance(remembered, dict) and isinstance(remembered.get("snapshot"), str):
                self._alerted = remembered["snapshot"]
            self._loaded = True
        return self._alerted
