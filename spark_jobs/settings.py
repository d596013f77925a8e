"""One settings object: defaults < YAML file ($TIDELINE_CONFIG) < TIDELINE_<SECTION>__<KEY>.

Every duration is configurable so tests and the demo can run days of semantics in minutes.
A wrong value fails at start with a message naming the key and what to write instead.

Each section is declared once, with its keys' kinds, defaults and meanings, in the package
that owns it (`<package>/settings.py`, in the settings language of `spark_jobs.config`);
this module only assembles them, and `tideline config show` prints the result.
"""

from __future__ import annotations

import dataclasses
import os
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spark_jobs.catalog import JOB_NAMES
from spark_jobs.cluster.settings import ClusterSettings
from spark_jobs.config.fields import ConfigError, build_section, is_section, section_defaults
from spark_jobs.config.layers import ENV_PREFIX, Sources, check_known, deep_merge, read_layers
from spark_jobs.control.settings import (
    AirflowSettings,
    AlertSettings,
    MaintenanceSettings,
    MonitorSettings,
    ValidationSettings,
)
from spark_jobs.experiments.settings import ExperimentSettings, MetadataSettings
from spark_jobs.fraud.settings import FRAUD_STATES, FraudSettings
from spark_jobs.local.postgres.settings import PostgresSettings
from spark_jobs.results.settings import (
    DEFAULT_GUARDRAILS,
    STAT_METHODS,
    DashboardSettings,
    StatsSettings,
)
from spark_jobs.samples.settings import COMPRESSIONS, SamplesSettings
from spark_jobs.streaming.settings import (
    EMBEDDED_BROKER_PORT,
    JobSettings,
    KafkaSettings,
    LakeSettings,
    SparkSettings,
)

__all__ = [
    "COMPRESSIONS", "DEFAULTS", "DEFAULT_GUARDRAILS", "EMBEDDED_BROKER_PORT", "ENV_PREFIX",
    "FRAUD_STATES", "SECTIONS", "STAT_METHODS", "STREAMING_JOBS", "AirflowSettings",
    "AlertSettings", "ClusterSettings", "ConfigError", "DashboardSettings",
    "ExperimentSettings", "FraudSettings",
    "JobSettings", "KafkaSettings", "LakeSettings", "MaintenanceSettings", "MetadataSettings",
    "MonitorSettings", "PostgresSettings", "SamplesSettings", "Settings", "SparkSettings",
    "StatsSettings",
    "ValidationSettings", "build_settings", "deep_merge", "load_settings",
]


@dataclass(frozen=True)
class Settings:
    """The sections, in the order they are built (a section's `finish` may read earlier
    ones: metadata and validation derive paths from lake, stats reads experiments) and shown.
    `raw` is the merged tree as written, `sources` the layers each `section.key` came from."""

    kafka: KafkaSettings
    spark: SparkSettings
    lake: LakeSettings
    cluster: ClusterSettings
    postgres: PostgresSettings
    metadata: MetadataSettings
    experiments: ExperimentSettings
    jobs: JobSettings
    alerts: AlertSettings
    airflow: AirflowSettings
    validation: ValidationSettings
    monitor: MonitorSettings
    maintenance: MaintenanceSettings
    stats: StatsSettings
    dashboard: DashboardSettings
    fraud: FraudSettings
    samples: SamplesSettings
    raw: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)
    sources: Sources = field(repr=False, compare=False, default_factory=dict)


_HINTS = typing.get_type_hints(Settings)
SECTIONS: dict[str, type] = {
    f.name: _HINTS[f.name] for f in dataclasses.fields(Settings) if is_section(_HINTS[f.name])
}
DEFAULTS: dict[str, dict[str, Any]] = {
    name: section_defaults(section) for name, section in SECTIONS.items()
}
STREAMING_JOBS = JOB_NAMES  # the jobs monitor.jobs may name (the catalog's, in pipeline order)


def build_settings(tree: Mapping[str, Any], sources: Sources | None = None) -> Settings:
    """Validate a merged config tree into typed settings."""
    check_known(tree, DEFAULTS)
    done: dict[str, Any] = {}
    for name, section in SECTIONS.items():
        done[name] = build_section(section, name, tree[name], done)
    return Settings(**done, raw=dict(tree), sources=dict(sources or {}))


def load_settings(
    environ: Mapping[str, str] | None = None, overrides: Mapping[str, Any] | None = None
) -> Settings:
    """Defaults, then the YAML file named by TIDELINE_CONFIG, then environment, then overrides."""
    tree, sources = read_layers(DEFAULTS, os.environ if environ is None else environ, overrides)
    return build_settings(tree, sources)
