"""One settings object: defaults < YAML file ($TIDELINE_CONFIG) < TIDELINE_<SECTION>__<KEY>.

Every duration is configurable so tests and the demo can run days of semantics in minutes.
A wrong value fails at start with a message naming the key and what to write instead.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from spark_jobs.config.durations import DurationError, parse_duration_ms

ENV_PREFIX = "TIDELINE_"
EMBEDDED_BROKER_PORT = 19092

DEFAULTS: dict[str, dict[str, Any]] = {
    "kafka": {
        "bootstrap": f"127.0.0.1:{EMBEDDED_BROKER_PORT}",
        "client": {},
        "partitions": 2,
    },
    "spark": {"master": "local[*]", "conf": {}},
    "lake": {"root": "./lake", "checkpoints": None, "snapshots": None},
    "metadata": {"url": None},
    "experiments": {
        "period": "3d",
        "window": "15m",
        "lateness": "10m",
        "dedup_ttl": "5m",
        "cap_per_user_hour": 1000,
        "critical_event_types": ["impression", "click", "save", "search"],
    },
    "jobs": {
        "trigger": "1s",
        "max_records_per_trigger": 200_000,
        "snapshot_refresh": "10s",
        "compact_every_batches": 50,
        "idle_timeout": "30s",
    },
    "alerts": {"webhook_url": None, "email_to": [], "webhook_timeout": "10s"},
    "airflow": {"home": None, "host": "127.0.0.1", "port": 8080, "base_url": None},
    "validation": {"max_drift": 0.02, "start_date": None, "data_docs": None},
    "monitor": {
        "stale_after": "3m",
        "max_lag": 100_000,
        "restart_limit": 3,
        "restart_window": "30m",
        "stop_timeout": "60s",
        "jobs": ["filter_events", "filter_activations", "experiment_metrics"],
    },
    "stats": {
        "alpha": 0.05,
        "method": "sequential",
        "mixture_sd": 0.1,
        "srm_alpha": 0.001,
        "min_users": 100,
        "guardrail_events": None,  # None = impression, when it is a critical event type
    },
    "dashboard": {"host": "127.0.0.1", "port": 8050, "refresh": "10s"},
    "fraud": {
        "lateness": "2m",
        "alert_on_late_events": False,
        "bucket": "0",
        "state": "driver",
        "shards": 2,
        "snapshot_every": 500,
        "idle_timeout": "1s",
    },
    "samples": {
        "window": "10m",
        "lateness": "2m",
        "signals": ["like", "share", "comment", "favorite", "play", "skip"],
        "compression": "zstd",
        "min_match_rate": 0.999,
    },
    "maintenance": {
        "vacuum_retention": "7d",
        "snapshots_kept": 288,
        "checkpoint_batches_kept": 100,
    },
}


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message says what to fix."""


@dataclass(frozen=True)
class KafkaSettings:
    bootstrap: str
    client: dict[str, Any]
    partitions: int


@dataclass(frozen=True)
class SparkSettings:
    master: str
    conf: dict[str, Any]


@dataclass(frozen=True)
class LakeSettings:
    root: str
    checkpoints: str
    snapshots: str

    def table(self, name: str) -> str:
        """URI of the Delta table `name` under the lake root."""
        return f"{self.root.rstrip('/')}/{name}"

    def checkpoint(self, job: str) -> str:
        """Spark checkpoint folder of one job."""
        return f"{self.checkpoints.rstrip('/')}/{job}"


@dataclass(frozen=True)
class MetadataSettings:
    url: str


@dataclass(frozen=True)
class ExperimentSettings:
    period_ms: int
    window_ms: int
    lateness_ms: int
    dedup_ttl_ms: int
    cap_per_user_hour: int
    critical_event_types: tuple[str, ...]


@dataclass(frozen=True)
class JobSettings:
    trigger_ms: int
    max_records_per_trigger: int
    snapshot_refresh_ms: int
    compact_every_batches: int
    idle_timeout_ms: int


@dataclass(frozen=True)
class AlertSettings:
    """Channels beyond the always-on `alerts` table and log line; None/empty = off."""

    webhook_url: str | None
    email_to: tuple[str, ...]
    webhook_timeout_ms: int


@dataclass(frozen=True)
class AirflowSettings:
    home: str
    host: str
    port: int
    base_url: str

    def run_url(self, dag_id: str, run_id: str) -> str:
        """Link to one DAG run in the Airflow 3 UI (alerts and results point here)."""
        from urllib.parse import quote

        return f"{self.base_url.rstrip('/')}/dags/{quote(dag_id)}/runs/{quote(run_id, safe='')}"


@dataclass(frozen=True)
class ValidationSettings:
    max_drift: float
    start_date: str | None
    data_docs: str


@dataclass(frozen=True)
class MonitorSettings:
    stale_after_ms: int
    max_lag: int
    restart_limit: int
    restart_window_ms: int
    stop_timeout_ms: int
    jobs: tuple[str, ...] = ("filter_events", "filter_activations", "experiment_metrics")


@dataclass(frozen=True)
class MaintenanceSettings:
    vacuum_retention_ms: int
    snapshots_kept: int
    checkpoint_batches_kept: int


STAT_METHODS = ("sequential", "bonferroni")
DEFAULT_GUARDRAILS = ("impression",)


@dataclass(frozen=True)
class StatsSettings:
    """How verdicts are reached: `method` names the test a verdict uses (the other is shown
    too); `mixture_sd` is the mSPRT mixing spread in per-user standard deviations."""

    alpha: float
    method: str
    mixture_sd: float
    srm_alpha: float
    min_users: int
    guardrail_events: tuple[str, ...]


@dataclass(frozen=True)
class FraudSettings:
    """fraud_rules: watermark delay, whether late transactions may alert, the pre-aggregation
    bucket (0 = exact) and how many state shards split the rules (parallelism)."""

    lateness_ms: int
    alert_on_late_events: bool
    bucket_ms: int
    shards: int
    state: str = "driver"  # driver: one engine on the driver; spark: transformWithState shards
    snapshot_every: int = 500  # driver state: batches between snapshots
    idle_timeout_ms: int = 1_000  # a quiet rules topic stops holding transactions back


@dataclass(frozen=True)
class SamplesSettings:
    """training_samples: attribution window, watermark delay, the label signals (config order
    is the labels' field order), the Kafka compression of the samples topic, and the match
    rate below which the shadow validation alerts."""

    window_ms: int
    lateness_ms: int
    signals: tuple[str, ...]
    compression: str
    min_match_rate: float


@dataclass(frozen=True)
class DashboardSettings:
    host: str
    port: int
    refresh_ms: int


@dataclass(frozen=True)
class Settings:
    kafka: KafkaSettings
    spark: SparkSettings
    lake: LakeSettings
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


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Maps merge key by key; any other value in `override` replaces the base value."""
    merged = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _env_layer(environ: Mapping[str, str]) -> dict[str, Any]:
    layer: dict[str, Any] = {}
    # Shallow names first, so TIDELINE_A__B__C refines TIDELINE_A__B whatever the env order.
    for name, text in sorted(environ.items(), key=lambda item: item[0].count("__")):
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        path = [part.lower() for part in name[len(ENV_PREFIX) :].split("__")]
        try:
            value = yaml.safe_load(text) if text != "" else ""
        except yaml.YAMLError as exc:
            raise ConfigError(f"{name}: not valid YAML ({exc.__class__.__name__})") from exc
        node = layer
        for depth, part in enumerate(path[:-1], start=1):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                parent = ENV_PREFIX + "__".join(path[:depth]).upper()
                raise ConfigError(f"{name}: {parent} is set to a value that is not a map")
        node[path[-1]] = value
    return layer


def _file_layer(path: str | None) -> dict[str, Any]:
    if not path:
        return {}
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"TIDELINE_CONFIG names {path!r}, which is not a file")
    try:
        loaded = yaml.safe_load(file.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(loaded, Mapping):
        raise ConfigError(f"{path}: the top level must be a map of sections")
    return dict(loaded)


def _check_known(tree: Mapping[str, Any]) -> None:
    for section, values in tree.items():
        if section not in DEFAULTS:
            raise ConfigError(
                f"unknown config section {section!r} (known: {', '.join(sorted(DEFAULTS))})"
            )
        if not isinstance(values, Mapping):
            raise ConfigError(f"config section {section!r} must be a map")
        for key in values:
            if key not in DEFAULTS[section]:
                known = ", ".join(sorted(DEFAULTS[section]))
                raise ConfigError(f"unknown setting {section}.{key} (known: {known})")


def _duration(tree: Mapping[str, Any], section: str, key: str, minimum: int = 0) -> int:
    raw = tree[section][key]
    if isinstance(raw, int | float) and not isinstance(raw, bool) and raw != 0:
        raise ConfigError(
            f"{section}.{key}: {raw!r} has no unit; write e.g. {raw}s or {raw}ms (units ms, s, "
            "m, h, d), ISO 8601 like PT15M, or 0"
        )
    try:
        value = parse_duration_ms(raw)
    except DurationError as exc:
        raise ConfigError(f"{section}.{key}: {exc}") from exc
    if value < minimum:
        raise ConfigError(f"{section}.{key} must be at least {minimum} ms, got {value} ms")
    return value


def _positive_int(tree: Mapping[str, Any], section: str, key: str) -> int:
    value = tree[section][key]
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{section}.{key} must be a positive integer, got {value!r}")
    return value


def _string_list(tree: Mapping[str, Any], section: str, key: str) -> tuple[str, ...]:
    value = tree[section][key]
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{section}.{key} must be a non-empty list of names, got {value!r}")
    return tuple(value)


def _map(tree: Mapping[str, Any], section: str, key: str) -> dict[str, Any]:
    value = tree[section][key]
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{section}.{key} must be a map, got {value!r}")
    return dict(value)


def _fraction(tree: Mapping[str, Any], section: str, key: str) -> float:
    value = tree[section][key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
        raise ConfigError(
            f"{section}.{key} must be a fraction in [0, 1), e.g. 0.02 for 2 %, got {value!r}"
        )
    return float(value)


def _optional_text(tree: Mapping[str, Any], section: str, key: str) -> str | None:
    value = tree[section][key]
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{section}.{key} must be text, got {value!r}")
    return value


def _iso_date(tree: Mapping[str, Any], section: str, key: str) -> str | None:
    value = tree[section][key]
    if value is None or value == "":
        return None
    if isinstance(value, datetime.date):  # YAML reads 2026-01-01 as a date
        return value.isoformat()
    try:
        return datetime.date.fromisoformat(str(value)).isoformat()
    except ValueError:
        message = f"{section}.{key} must be a date like 2026-01-01, got {value!r}"
        raise ConfigError(message) from None


def _email_list(tree: Mapping[str, Any], section: str, key: str) -> tuple[str, ...]:
    value = tree[section][key]
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) and "@" in v for v in value):
        raise ConfigError(f"{section}.{key} must be a list of e-mail addresses, got {value!r}")
    return tuple(value)


COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")
FRAUD_STATES = ("driver", "spark")


def _choice(tree: Mapping[str, Any], section: str, key: str, allowed: tuple[str, ...]) -> str:
    value = tree[section][key]
    if value not in allowed:
        raise ConfigError(f"{section}.{key} must be one of {', '.join(allowed)}, got {value!r}")
    return str(value)


def _samples(tree: Mapping[str, Any]) -> SamplesSettings:
    signals = _string_list(tree, "samples", "signals")
    bad = [s for s in signals if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", s)]
    if bad or len(set(signals)) != len(signals):
        raise ConfigError(
            f"samples.signals must be distinct names of letters, digits and _ (they become "
            f"label fields), got {list(signals)!r}"
        )
    compression = _choice(tree, "samples", "compression", COMPRESSIONS)
    window_ms = _duration(tree, "samples", "window", 1)
    return SamplesSettings(
        window_ms=window_ms,
        lateness_ms=_duration(tree, "samples", "lateness"),
        signals=signals,
        compression=compression,
        min_match_rate=_rate(tree, "samples", "min_match_rate"),
    )


def _rate(tree: Mapping[str, Any], section: str, key: str) -> float:
    value = tree[section][key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ConfigError(
            f"{section}.{key} must be a rate in [0, 1], e.g. 0.999 for 99.9 %, got {value!r}"
        )
    return float(value)


STREAMING_JOBS = (
    "filter_events", "filter_activations", "experiment_metrics", "fraud_rules", "training_samples",
)


def _monitored_jobs(tree: Mapping[str, Any]) -> tuple[str, ...]:
    jobs = _string_list(tree, "monitor", "jobs")
    unknown = [j for j in jobs if j not in STREAMING_JOBS]
    if unknown or len(set(jobs)) != len(jobs):
        raise ConfigError(
            f"monitor.jobs must name distinct streaming jobs among {', '.join(STREAMING_JOBS)}, "
            f"got {list(jobs)!r}"
        )
    return tuple(j for j in STREAMING_JOBS if j in jobs)  # pipeline order


def _airflow(tree: Mapping[str, Any]) -> AirflowSettings:
    host = str(tree["airflow"]["host"])
    port = _positive_int(tree, "airflow", "port")
    home = _optional_text(tree, "airflow", "home") or str(
        Path(__file__).resolve().parents[1] / "infra" / "airflow_home"
    )
    base_url = _optional_text(tree, "airflow", "base_url") or f"http://{host}:{port}"
    return AirflowSettings(home=home, host=host, port=port, base_url=base_url)


def _flag(tree: Mapping[str, Any], section: str, key: str) -> bool:
    value = tree[section][key]
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if not isinstance(value, bool):
        raise ConfigError(f"{section}.{key} must be true or false, got {value!r}")
    return value


def _open_fraction(tree: Mapping[str, Any], section: str, key: str) -> float:
    value = tree[section][key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise ConfigError(f"{section}.{key} must be between 0 and 1 (exclusive), got {value!r}")
    return float(value)


def _stats(tree: Mapping[str, Any]) -> StatsSettings:
    method = tree["stats"]["method"]
    if method not in STAT_METHODS:
        raise ConfigError(f"stats.method must be one of {', '.join(STAT_METHODS)}, got {method!r}")
    mixture_sd = tree["stats"]["mixture_sd"]
    if isinstance(mixture_sd, bool) or not isinstance(mixture_sd, int | float) or mixture_sd <= 0:
        raise ConfigError(f"stats.mixture_sd must be a positive number, got {mixture_sd!r}")
    guardrails = tree["stats"]["guardrail_events"] or []
    if isinstance(guardrails, str):
        guardrails = [part.strip() for part in guardrails.split(",") if part.strip()]
    if not isinstance(guardrails, list) or not all(isinstance(v, str) for v in guardrails):
        raise ConfigError(
            f"stats.guardrail_events must be a list of event types, got {guardrails!r}"
        )
    return StatsSettings(
        alpha=_open_fraction(tree, "stats", "alpha"),
        method=method,
        mixture_sd=float(mixture_sd),
        srm_alpha=_open_fraction(tree, "stats", "srm_alpha"),
        min_users=_positive_int(tree, "stats", "min_users"),
        guardrail_events=tuple(guardrails),
    )


def build_settings(tree: Mapping[str, Any]) -> Settings:
    """Validate a merged config tree into typed settings."""
    _check_known(tree)
    root = str(tree["lake"]["root"])
    experiments = ExperimentSettings(
        period_ms=_duration(tree, "experiments", "period", 1),
        window_ms=_duration(tree, "experiments", "window", 1),
        lateness_ms=_duration(tree, "experiments", "lateness"),
        dedup_ttl_ms=_duration(tree, "experiments", "dedup_ttl"),
        cap_per_user_hour=_positive_int(tree, "experiments", "cap_per_user_hour"),
        critical_event_types=_string_list(tree, "experiments", "critical_event_types"),
    )
    if experiments.window_ms > experiments.period_ms:
        raise ConfigError("experiments.window must not be longer than experiments.period")
    stats = _stats(tree)
    if tree["stats"]["guardrail_events"] is None:
        defaults = tuple(e for e in DEFAULT_GUARDRAILS if e in experiments.critical_event_types)
        stats = dataclasses.replace(stats, guardrail_events=defaults)
    unknown = set(stats.guardrail_events) - set(experiments.critical_event_types)
    if unknown:
        raise ConfigError(
            f"stats.guardrail_events {sorted(unknown)} are not critical event types "
            f"(experiments.critical_event_types: {', '.join(experiments.critical_event_types)})"
        )
    bootstrap = tree["kafka"]["bootstrap"]
    if not isinstance(bootstrap, str) or not bootstrap.strip():
        raise ConfigError("kafka.bootstrap must be host:port[,host:port...]")
    return Settings(
        kafka=KafkaSettings(
            bootstrap=bootstrap.strip(),
            client=_map(tree, "kafka", "client"),
            partitions=_positive_int(tree, "kafka", "partitions"),
        ),
        spark=SparkSettings(master=str(tree["spark"]["master"]), conf=_map(tree, "spark", "conf")),
        lake=LakeSettings(
            root=root,
            checkpoints=str(tree["lake"]["checkpoints"] or f"{root.rstrip('/')}/_checkpoints"),
            snapshots=str(tree["lake"]["snapshots"] or f"{root.rstrip('/')}/ramp_snapshots"),
        ),
        metadata=MetadataSettings(
            url=str(tree["metadata"]["url"] or f"sqlite:///{root.rstrip('/')}/metadata.db")
        ),
        experiments=experiments,
        jobs=JobSettings(
            trigger_ms=_duration(tree, "jobs", "trigger"),
            max_records_per_trigger=_positive_int(tree, "jobs", "max_records_per_trigger"),
            snapshot_refresh_ms=_duration(tree, "jobs", "snapshot_refresh", 1),
            compact_every_batches=_positive_int(tree, "jobs", "compact_every_batches"),
            idle_timeout_ms=_duration(tree, "jobs", "idle_timeout", 1),
        ),
        alerts=AlertSettings(
            webhook_url=_optional_text(tree, "alerts", "webhook_url"),
            email_to=_email_list(tree, "alerts", "email_to"),
            webhook_timeout_ms=_duration(tree, "alerts", "webhook_timeout", 1),
        ),
        airflow=_airflow(tree),
        validation=ValidationSettings(
            max_drift=_fraction(tree, "validation", "max_drift"),
            start_date=_iso_date(tree, "validation", "start_date"),
            data_docs=_optional_text(tree, "validation", "data_docs")
            or f"{root.rstrip('/')}/_data_docs",
        ),
        monitor=MonitorSettings(
            stale_after_ms=_duration(tree, "monitor", "stale_after", 1),
            max_lag=_positive_int(tree, "monitor", "max_lag"),
            restart_limit=_positive_int(tree, "monitor", "restart_limit"),
            restart_window_ms=_duration(tree, "monitor", "restart_window", 1),
            stop_timeout_ms=_duration(tree, "monitor", "stop_timeout", 1),
            jobs=_monitored_jobs(tree),
        ),
        maintenance=MaintenanceSettings(
            vacuum_retention_ms=_duration(tree, "maintenance", "vacuum_retention"),
            snapshots_kept=_positive_int(tree, "maintenance", "snapshots_kept"),
            checkpoint_batches_kept=_positive_int(tree, "maintenance", "checkpoint_batches_kept"),
        ),
        stats=stats,
        dashboard=DashboardSettings(
            host=str(tree["dashboard"]["host"]),
            port=_positive_int(tree, "dashboard", "port"),
            refresh_ms=_duration(tree, "dashboard", "refresh", 1000),
        ),
        fraud=FraudSettings(
            lateness_ms=_duration(tree, "fraud", "lateness"),
            alert_on_late_events=_flag(tree, "fraud", "alert_on_late_events"),
            bucket_ms=_duration(tree, "fraud", "bucket"),
            shards=_positive_int(tree, "fraud", "shards"),
            state=_choice(tree, "fraud", "state", FRAUD_STATES),
            snapshot_every=_positive_int(tree, "fraud", "snapshot_every"),
            idle_timeout_ms=_duration(tree, "fraud", "idle_timeout", 1),
        ),
        samples=_samples(tree),
        raw=dict(tree),
    )


def load_settings(
    environ: Mapping[str, str] | None = None, overrides: Mapping[str, Any] | None = None
) -> Settings:
    """Defaults, then the YAML file named by TIDELINE_CONFIG, then environment, then overrides."""
    env = os.environ if environ is None else environ
    tree = deep_merge(DEFAULTS, _file_layer(env.get("TIDELINE_CONFIG")))
    tree = deep_merge(tree, _env_layer(env))
    if overrides:
        tree = deep_merge(tree, overrides)
    return build_settings(tree)
