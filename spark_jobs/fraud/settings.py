"""Settings of fraud detection (job `fraud_rules`): section fraud.

Declared once (`spark_jobs.config.fields.setting`); `spark_jobs.settings` assembles it.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_jobs.config.fields import setting
from spark_jobs.config.kinds import Choice, Duration, Flag, PositiveInt

FRAUD_STATES = ("driver", "spark")


@dataclass(frozen=True)
class FraudSettings:
    """fraud_rules: watermark delay, whether late transactions may alert, how far behind the
    watermark a transaction still counts (late retention), the pre-aggregation bucket
    (0 = exact) and how many state shards split the rules (parallelism)."""

    lateness_ms: int = setting("2m", Duration(), "watermark delay of the transactions")
    alert_on_late_events: bool = setting(
        False, Flag(), "whether a transaction later than the watermark may still alert")
    late_retention_ms: int = setting(
        "1h", Duration(),
        "windows are kept this long past their end: a transaction up to this far behind the "
        "watermark still counts (and alerts late over a complete window); further behind it "
        "goes to dead_letters as late")
    bucket_ms: int = setting("0", Duration(), "pre-aggregation bucket of the windows (0 = exact)")
    shards: int = setting(
        2, PositiveInt(),
        "engines splitting the rules by ruleId (driver state: one process each; spark state: "
        "transformWithState keys)", unit="shards")
    state: str = setting(
        "driver", Choice(FRAUD_STATES),
        "driver: the engines on the driver's machine; spark: transformWithState shards")
    snapshot_every: int = setting(
        10_000, PositiveInt(),
        "batches after which an engine snapshot is taken at the latest (driver state; one is "
        "taken sooner once the change files since the last outweigh it and 64 MB)",
        unit="batches")
    idle_timeout_ms: int = setting(
        "1s", Duration(minimum=1), "a quiet rules topic stops holding transactions back")
