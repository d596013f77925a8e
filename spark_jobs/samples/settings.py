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
    """training_samples: attribution window, watermark delay, the label signals (config order
    is the labels' field order), the Kafka compression of the samples topic, and the match
    rate below which the shadow validation alerts."""

    window_ms: int = setting(
        "10m", Duration(minimum=1), "attribution window: engagements joined to a view")
    lateness_ms: int = setting("2m", Duration(), "watermark delay of views and engagements")
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
        return values
