"""The settings language: every setting declared once (kind, default, meaning) in the section
of the system that owns it, and a new setting or section is one declaration."""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from spark_jobs.config.fields import (
    ConfigError,
    Kind,
    build_section,
    declarations,
    section_defaults,
    setting,
)
from spark_jobs.config.kinds import Duration, Map, Names
from spark_jobs.config.layers import read_layers
from spark_jobs.settings import DEFAULTS, SECTIONS, load_settings

# The hand-written table the declarations replaced: the defaults must not have moved.
OLD_DEFAULTS: dict[str, dict[str, Any]] = {
    "kafka": {"bootstrap": "127.0.0.1:19092", "client": {}, "partitions": 2,
              "broker_bind": "127.0.0.1",  # issue 16: the embedded broker's bind address
              "schema_registry_url": None},
    "spark": {"master": "local[*]", "conf": {}},
    "lake": {"root": "./lake", "checkpoints": None, "snapshots": None},
    "cluster": {  # issue 16: tideline cluster
        "host": "127.0.0.1", "workers": 2, "worker_cores": 1, "worker_memory": "2g",
        "master_port": 7077, "master_ui_port": 8088, "worker_ui_port": 8091,
        "history_port": 18080, "home": None,
    },
    "postgres": {  # issue 16: tideline postgres
        "host": "127.0.0.1", "port": 5433, "home": None, "user": "tideline", "password": None,
        "metadata_db": "tideline", "airflow_db": "airflow",
    },
    "metadata": {"url": None},
    "experiments": {
        "period": "3d", "window": "15m", "lateness": "10m", "dedup_ttl": "5m",
        "cap_per_user_hour": 1000,
        "critical_event_types": ["impression", "click", "save", "search"],
        "snapshot_interval": "5m",
        "pre_exposure": "1d",  # issue 17: CUPED's lookback
    },
    "jobs": {
        "trigger": "1s", "max_records_per_trigger": 200_000, "snapshot_refresh": "10s",
        "compact_every_batches": 50, "idle_timeout": "30s",
        "max_clock_skew": "1h", "max_message_bytes": 1048576, "state_buckets": 64,
    },
    "alerts": {"webhook_url": None, "email_to": [], "webhook_timeout": "10s",
               # issue 17: channels as Airflow Connections
               "webhook_conn_id": "tideline_webhook", "smtp_conn_id": "tideline_smtp"},
    "airflow": {"home": None, "host": "127.0.0.1", "port": 8080, "base_url": None,
                "database": None,  # issue 16: Airflow's DB on the private PostgreSQL
                "spark_slots": 1},  # issue 17: the tideline_spark pool
    "validation": {"max_drift": 0.02, "start_date": None, "data_docs": None},
    "monitor": {
        "stale_after": "3m", "max_lag": 100_000, "restart_limit": 3, "restart_window": "30m",
        "stop_timeout": "60s",
        "jobs": ["filter_events", "filter_activations", "experiment_metrics"],
    },
    "stats": {
        "alpha": 0.05, "method": "sequential", "correction": "bonferroni", "mixture_sd": 0.1,
        "srm_alpha": 0.001, "min_users": 100, "power": 0.8, "target_mde": 0.05,
        "guardrail_events": None,
    },
    "dashboard": {"host": "127.0.0.1", "port": 8050, "refresh": "5s"},
    "fraud": {
        "lateness": "2m", "alert_on_late_events": False, "bucket": "0", "state": "driver",
        "shards": 2, "snapshot_every": 10_000, "idle_timeout": "1s", "late_retention": "1h",
    },
    "samples": {
        "window": "10m", "lateness": "2m", "dedup_ttl": "1d",
        "signals": ["like", "share", "comment", "favorite", "play", "skip"],
        "compression": "zstd", "min_match_rate": 0.999,
    },
    "maintenance": {
        "vacuum_retention": "7d", "log_retention": "1m", "snapshots_kept": 288,
        "checkpoint_batches_kept": 100,
    },
}

OWNERS = {
    "spark_jobs.streaming.settings": ("kafka", "spark", "lake", "jobs"),
    "spark_jobs.experiments.settings": ("metadata", "experiments"),
    "spark_jobs.cluster.settings": ("cluster",),
    "spark_jobs.local.postgres.settings": ("postgres",),
    "spark_jobs.fraud.settings": ("fraud",),
    "spark_jobs.samples.settings": ("samples",),
    "spark_jobs.results.settings": ("stats", "dashboard"),
    "spark_jobs.control.settings": ("alerts", "airflow", "validation", "monitor", "maintenance"),
}


def test_defaults_are_derived_from_the_declarations_and_unchanged():
    assert DEFAULTS == OLD_DEFAULTS


def test_every_field_of_every_section_is_a_complete_declaration():
    for name, section in SECTIONS.items():
        declared = declarations(section)
        assert [d.attribute for d in declared] == [f.name for f in dataclasses.fields(section)]
        assert len({d.key for d in declared}) == len(declared), name
        for d in declared:
            assert isinstance(d.setting.kind, Kind), (name, d.key)
            assert d.setting.meaning.strip() and "\n" not in d.setting.meaning, (name, d.key)
            assert d.key in DEFAULTS[name]


def test_each_section_is_declared_in_the_package_that_owns_it():
    owned = {section: module for module, sections in OWNERS.items() for section in sections}
    assert set(owned) == set(SECTIONS)
    for name, section in SECTIONS.items():
        assert section.__module__ == owned[name], name


def test_system_settings_modules_import_only_the_language_and_the_catalog():
    """No cycle: system settings never import the root (which imports them) nor a system."""
    root = Path(__file__).resolve().parents[2]
    for module in OWNERS:
        tree = ast.parse((root / (module.replace(".", "/") + ".py")).read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        local = {m for m in imported if m and m.startswith("spark_jobs")}
        assert all(m.startswith("spark_jobs.config.") or m == "spark_jobs.catalog"
                   for m in local), (module, local)
    code = "import sys\n" + "".join(f"import {m}\n" for m in OWNERS) + (
        "assert 'spark_jobs.settings' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)


def test_a_section_built_without_a_tree_has_the_declared_defaults():
    """The dataclass defaults are the parsed declared ones (declared once: no second copy)."""
    loaded = load_settings(environ={})
    for name in ("kafka", "spark", "experiments", "jobs", "alerts", "monitor", "maintenance",
                 "dashboard", "fraud", "samples"):
        assert SECTIONS[name]() == getattr(loaded, name), name


def test_settings_names_callers_import_stay_importable():
    from spark_jobs import settings
    from spark_jobs.catalog import JOB_NAMES

    for name in ("ConfigError", "DEFAULTS", "EMBEDDED_BROKER_PORT", "ENV_PREFIX", "Settings",
                 "build_settings", "deep_merge", "load_settings", "KafkaSettings",
                 "AlertSettings", "ExperimentSettings", "MonitorSettings", "SamplesSettings"):
        assert hasattr(settings, name), name
    assert settings.ConfigError is ConfigError
    assert settings.STREAMING_JOBS == JOB_NAMES


# -- a new setting, a new section: one declaration each ----------------------------------
@dataclass(frozen=True)
class ToySettings:
    flush_ms: int = setting("5s", Duration(minimum=1), "how often toys are flushed")
    colours: tuple[str, ...] = setting(["red"], Names(noun="colours"), "toy colours")
    extra: dict[str, Any] = setting({}, Map(), "passed through")

    @classmethod
    def finish(cls, values: dict[str, Any], done: dict[str, Any]) -> dict[str, Any]:
        if "black" in values["colours"]:
            raise ConfigError("toys.colours: no black toys")
        return values


def test_a_new_section_is_one_declaration_from_defaults_to_typed_values():
    defaults = {"toys": section_defaults(ToySettings)}
    assert defaults == {"toys": {"flush": "5s", "colours": ["red"], "extra": {}}}
    tree, sources = read_layers(
        defaults, {"TIDELINE_TOYS__FLUSH": "2m", "TIDELINE_TOYS__COLOURS": "red, blue"}
    )
    toys = build_section(ToySettings, "toys", tree["toys"], {})
    assert toys == ToySettings(flush_ms=120_000, colours=("red", "blue"), extra={})
    assert sources["toys.flush"] == ("TIDELINE_TOYS__FLUSH",)
    assert sources["toys.extra"] == ("default",)
    assert ToySettings().flush_ms == 5_000 and ToySettings().extra == {}


@pytest.mark.parametrize(("values", "message"), [
    ({"flush": 5}, "toys.flush: 5 has no unit"),
    ({"flush": "0"}, "toys.flush must be at least 1 ms"),
    ({"colours": []}, "toys.colours must be a non-empty list of colours"),
    ({"colours": ["black"]}, "toys.colours: no black toys"),
    ({"extra": [1]}, "toys.extra must be a map"),
])
def test_a_new_section_gets_the_errors_of_its_kinds_and_its_hook(values, message):
    tree = {**section_defaults(ToySettings), **values}
    with pytest.raises(ConfigError, match=message):
        build_section(ToySettings, "toys", tree, {})
