"""Settings of the experiment results: sections stats and dashboard.

Declared once each (`spark_jobs.config.fields.setting`); `spark_jobs.settings` assembles them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spark_jobs.config.fields import ConfigError, setting
from spark_jobs.config.kinds import (
    BindAddress,
    Choice,
    Duration,
    Names,
    OpenFraction,
    Port,
    PositiveInt,
    PositiveNumber,
)

STAT_METHODS = ("sequential", "bonferroni")
CORRECTIONS = ("bonferroni", "holm", "bh")
DEFAULT_GUARDRAILS = ("impression",)


@dataclass(frozen=True)
class StatsSettings:
    """How verdicts are reached: `method` names the test a verdict uses (the other is shown
    too); `correction` how the comparisons' p-values are adjusted for each other (the looks
    are the method's business); `mixture_sd` is the mSPRT mixing spread in per-user standard
    deviations; `power` and `target_mde` give each experiment its target sample size."""

    alpha: float = setting(0.05, OpenFraction(), "significance level of the verdicts")
    method: str = setting(
        "sequential", Choice(STAT_METHODS), "the test a verdict uses (the other is shown too)")
    correction: str = setting(
        "bonferroni", Choice(CORRECTIONS),
        "correction across comparisons: bonferroni, holm (both family-wise) or bh "
        "(Benjamini-Hochberg, false discovery rate)")
    mixture_sd: float = setting(
        0.1, PositiveNumber(), "mSPRT mixing spread", unit="per-user standard deviations")
    srm_alpha: float = setting(
        0.001, OpenFraction(), "significance level of the sample ratio mismatch check")
    min_users: int = setting(
        100, PositiveInt(), "no verdict before this many triggered users per group",
        unit="users")
    power: float = setting(
        0.8, OpenFraction(), "power a comparison should reach for the target effect")
    target_mde: float = setting(
        0.05, PositiveNumber(), "smallest relative lift worth detecting (0.05 = 5 %)",
        unit="relative lift")
    guardrail_events: tuple[str, ...] = setting(
        None, Names(noun="event types", optional=True),
        "event types whose drop alerts (default: impression, when it is a critical type)")

    @classmethod
    def finish(cls, values: dict[str, Any], done: Mapping[str, Any]) -> dict[str, Any]:
        critical = done["experiments"].critical_event_types
        if values["guardrail_events"] is None:
            values["guardrail_events"] = tuple(e for e in DEFAULT_GUARDRAILS if e in critical)
        unknown = set(values["guardrail_events"]) - set(critical)
        if unknown:
            raise ConfigError(
                f"stats.guardrail_events {sorted(unknown)} are not critical event types "
                f"(experiments.critical_event_types: {', '.join(critical)})"
            )
        return values


@dataclass(frozen=True)
class DashboardSettings:
    host: str = setting(
        "127.0.0.1", BindAddress(),
        "address the results dashboard listens on (0.0.0.0: every interface, e.g. in a "
        "container)")
    port: int = setting(8050, Port(), "port of the results dashboard")
    refresh_ms: int = setting(
        "5s", Duration(minimum=1000), "how often the dashboard page reloads its results")
