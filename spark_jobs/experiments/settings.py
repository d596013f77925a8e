"""Settings of the experiment pipeline: sections metadata and experiments.

Declared once each (`spark_jobs.config.fields.setting`); `spark_jobs.settings` assembles them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spark_jobs.config.fields import ConfigError, setting
from spark_jobs.config.kinds import DatabaseUrl, Duration, Names, PositiveInt

_DATABASE_URL = re.compile(r"^[A-Za-z][\w+.-]*://")  # dialect[+driver]://..., as SQLAlchemy's

@dataclass(frozen=True)
class MetadataSettings:
    url: str = setting(
        None, DatabaseUrl(), "SQLAlchemy URL of the experiment metadata DB "
        "(default: sqlite:///<lake.root>/metadata.db)")

    @classmethod
    def finish(cls, values: dict[str, Any], done: Mapping[str, Any]) -> dict[str, Any]:
        root = done["lake"].root.rstrip("/")
        values["url"] = values["url"] or f"sqlite:///{root}/metadata.db"
        if not _DATABASE_URL.match(values["url"]):
            raise ConfigError(
                f"metadata.url must be a SQLAlchemy URL like sqlite:///path/metadata.db or "
                f"postgresql://user@host/db, got {re.sub(r':[^:@/]*@', ':***@', values['url'])!r}"
            )
        return values


@dataclass(frozen=True)
class ExperimentSettings:
    period_ms: int = setting("3d", Duration(minimum=1), "aggregation period after a ramp-up")
    window_ms: int = setting("15m", Duration(minimum=1), "metric window (tumbling, event time)")
    lateness_ms: int = setting(
        "10m", Duration(), "allowed event-time lateness (watermark delay) on every input")
    dedup_ttl_ms: int = setting(
        "5m", Duration(), "how long an event key is remembered for de-duplication")
    cap_per_user_hour: int = setting(
        1000, PositiveInt(), "at most this many raw events per user per event-time hour",
        unit="events")
    critical_event_types: tuple[str, ...] = setting(
        ["impression", "click", "save", "search"], Names(),
        "event types kept by the event filter")
    pre_exposure_ms: int = setting(
        "1d", Duration(), "CUPED: how far before the window of a user's first trigger their "
        "clean events count as pre-exposure activity (rounded up to whole windows; 0 turns "
        "the pre_volume columns off)")
    snapshot_interval_ms: int = setting(
        "5m", Duration(minimum=1000), "how often the ramp_snapshot DAG publishes a ramp "
        "snapshot; filter_activations alerts when its snapshot is 3 of these old")

    @classmethod
    def finish(cls, values: dict[str, Any], done: Mapping[str, Any]) -> dict[str, Any]:
        if values["window_ms"] > values["period_ms"]:
            raise ConfigError("experiments.window must not be longer than experiments.period")
        return values
