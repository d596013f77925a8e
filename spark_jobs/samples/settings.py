"""Settings of the training samples (job `training_samples`): section samples.

Declared once (`spark_jobs.config.fields.setting`); `spark_jobs.settings` assembles it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spark_jobs.config.fields import ConfigError, setting
from spark_jobs.config.kinds import Choice, Duration, Names, Rate

COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")
_FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class SamplesSettings:
    """training_samples: attribution window, watermark delay, how long a view_id is
    remembered, the label signals (config order is the labels' field order), the Kafka
    compression of the samples topic, and the match rate below which the shadow validation
    alerts."""

    window_ms: int = setting(
        "10m", Duration(minimum=1), "attribution window: engagements joined to a view")
    lateness_ms: int = setting("2m", Duration(), "watermark delay of views and engagements")
    dedup_ttl_ms: int = setting(
        "1d", Duration(minimum=1),
        "how long (event time) a view_id's first arrival is remembered, across users")
    signals: tuple[str, ...] = setting(
        ["like", "share", "comment", "favorite", "play", "skip"], Names(),
        "engagement signals that become label fields, in this order")
    compression: str = setting(
        "zstd", Choice(COMPRESSIONS), "Kafka compression of the training_samples topic")
    min_match_rate: float = setting(
        0.999, Rate(), "shadow validation alerts below this share of matching samples")

    @classmethod
    def finish(cls, values: dict[str, Any], done: Mapping[str, Any]) -> dict[str, Any]:
        signals = values["signals"]
        bad = [s for s in signals if not _FIELD_NAME.fullmatch(s)]
        if bad or len(set(signals)) != len(signals):
            raise ConfigError(
                f"samples.signals must be distinct names of letters, digits and _ (they become "
                f"label fields), got {list(signals)!r}"
            )
        if values["dedup_ttl_ms"] < values["window_ms"]:
            # a view_id re-sent beyond the TTL is a new view: its window must not overlap the
            # first one's, or one user's join would hold two pending views of one id
            raise ConfigError("samples.dedup_ttl must not be shorter than samples.window")
        return values
