"""What an alert says: what failed, where (experiment/group/window), by how much, and a link.

One immutable record, rendered the same way for every channel so a Slack message, an e-mail
and a row of the `alerts` table never disagree.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from spark_jobs.contracts.tables import ALERTS

ALERTS_SCHEMA = ALERTS.arrow_schema()


@dataclass(frozen=True)
class Alert:
    """One alert. `source` is the DAG or job that raised it, `kind` a short machine name."""

    source: str
    kind: str
    summary: str
    experiment_hash: str | None = None
    experiment_group: str | None = None
    window_end_ms: int | None = None
    metric: str | None = None
    observed: float | None = None
    threshold: float | None = None
    run_url: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    alert_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    created_at_ms: int = field(default_factory=lambda: int(time.time() * 1000))

    def __post_init__(self) -> None:
        for name in ("source", "kind", "summary"):
            if not getattr(self, name):
                raise ValueError(f"an alert needs a non-empty {name}")

    @property
    def subject(self) -> str:
        """Experiment, group and window as one readable phrase ('' when not about one)."""
        parts = []
        if self.experiment_hash:
            group = f"/{self.experiment_group}" if self.experiment_group else ""
            parts.append(f"{self.experiment_hash}{group}")
        if self.window_end_ms is not None:
            parts.append(f"window ending {iso_utc(self.window_end_ms)}")
        if self.metric:
            parts.append(self.metric)
        return ", ".join(parts)

    def headline(self) -> str:
        """`[tideline] source kind: summary (subject)` on one line."""
        subject = f" ({self.subject})" if self.subject else ""
        return f"[tideline] {self.source} {self.kind}: {self.summary}{subject}"

    def text(self) -> str:
        """The full message: headline, the measured value against its limit, the run link."""
        lines = [self.headline()]
        if self.observed is not None:
            limit = "" if self.threshold is None else f" (limit {self.threshold:g})"
            lines.append(f"observed {self.observed:g}{limit}")
        if self.run_url:
            lines.append(f"run: {self.run_url}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """The alert's fields as JSON-able values (webhook payloads, task logs)."""
        return {
            "alert_id": self.alert_id,
            "created_at": iso_utc(self.created_at_ms),
            "source": self.source,
            "kind": self.kind,
            "summary": self.summary,
            "experiment_hash": self.experiment_hash,
            "experiment_group": self.experiment_group,
            "window_end": self.window_end_ms,
            "metric": self.metric,
            "observed": self.observed,
            "threshold": self.threshold,
            "run_url": self.run_url,
            "details": self.details,
        }


def iso_utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def alert_rows(alerts: list[Alert], channels: list[str]) -> pa.Table:
    """Rows of the `alerts` table; `channels` lists where the alerts were sent."""
    return pa.Table.from_pylist(
        [
            {
                "alert_id": a.alert_id,
                "created_at": datetime.fromtimestamp(a.created_at_ms / 1000, UTC),
                "source": a.source,
                "kind": a.kind,
                "summary": a.summary,
                "experiment_hash": a.experiment_hash,
                "experiment_group": a.experiment_group,
                "window_end": a.window_end_ms,
                "metric": a.metric,
                "observed": a.observed,
                "threshold": a.threshold,
                "run_url": a.run_url,
                "details": json.dumps(a.details, sort_keys=True, default=str),
                "channels": ",".join(channels),
            }
            for a in alerts
        ],
        schema=ALERTS_SCHEMA,
    )
