"""Commit metadata of the metrics tables: who wrote a commit and the stamp of its rows.

experiment_metrics and experiment_metrics_provisional are upserted by every checkpoint lineage
of the job (a checkpoint reset starts a new one), so a restart cannot take the table's newest
rows for its own: each commit names its writer's app id and the `updated_at` its rows carry,
and a restart resumes from the rows of its own lineage's newest commit.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

COMMIT_APP = "tideline.app_id"
COMMIT_STAMP = "tideline.updated_at_us"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def stamp_us(updated_at: datetime) -> int:
    """The stamp of a commit's rows: their updated_at in microseconds since the epoch."""
    return (updated_at - _EPOCH) // timedelta(microseconds=1)


def lineage_info(app_id: str, updated_at: datetime) -> dict[str, str]:
    """The metadata every commit of the lineage `app_id` carries."""
    return {COMMIT_APP: app_id, COMMIT_STAMP: str(stamp_us(updated_at))}
