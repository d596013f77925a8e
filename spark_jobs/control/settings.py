"""Settings of the control plane: sections alerts, airflow, validation, monitor, maintenance.

Declared once each (`spark_jobs.config.fields.setting`); `spark_jobs.settings` assembles them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_jobs.catalog import DEFAULT_DEPLOYED, JOB_NAMES
from spark_jobs.config.fields import ConfigError, setting
from spark_jobs.config.kinds import (
    BindAddress,
    DatabaseUrl,
    Duration,
    Emails,
    Fraction,
    IsoDate,
    Names,
    OptionalText,
    Port,
    PositiveInt,
)
from spark_jobs.config.network import connect_host

AIRFLOW_HOME = Path(__file__).resolve().parents[2] / "infra" / "airflow_home"


@dataclass(frozen=True)
class AlertSettings:
    """Channels beyond the always-on `alerts` table and log line; None/empty = off."""

    webhook_url: str | None = setting(None, OptionalText(), "URL each alert is POSTed to")
    email_to: tuple[str, ...] = setting([], Emails(), "addresses each alert is mailed to")
    webhook_timeout_ms: int = setting(
        "10s", Duration(minimum=1), "how long a webhook call may take")
    webhook_conn_id: str | None = setting(
        "tideline_webhook", OptionalText(), "Airflow connection of the webhook (HTTP: host "
        "URL or host+schema+port, extra endpoint/headers); wins over webhook_url when defined")
    smtp_conn_id: str | None = setting(
        "tideline_smtp", OptionalText(), "Airflow SMTP connection the e-mails go through "
        "(recipients: email_to, else its extra `to`); without it Airflow's [smtp] settings")

    @classmethod
    def finish(cls, values: dict[str, Any], done: Mapping[str, Any]) -> dict[str, Any]:
        url = values["webhook_url"]
        if url is not None and not url.startswith(("http://", "https://")):
            raise ConfigError(f"alerts.webhook_url must be an http(s) URL, got {url!r}")
        return values


@dataclass(frozen=True)
class AirflowSettings:
    home: str = setting(
        None, OptionalText(), "AIRFLOW_HOME of the platform (default: infra/airflow_home)")
    host: str = setting(
        "127.0.0.1", BindAddress(), "address the Airflow UI listens on (0.0.0.0: every "
        "interface, e.g. in a container)")
    port: int = setting(8080, Port(), "port of the Airflow UI")
    base_url: str = setting(
        None, OptionalText(), "Airflow UI address in alert links (default: http://host:port)")
    database: str | None = setting(
        None, DatabaseUrl(), "SQLAlchemy URL of Airflow's metadata DB (default: airflow.db, "
        "SQLite, in the home; `tideline postgres start` prints a PostgreSQL one)")
    spark_slots: int = setting(
        1, PositiveInt(), "Spark batch applications Airflow runs at once (its pool "
        "tideline_spark, beside the streaming jobs)")

    @classmethod
    def finish(cls, values: dict[str, Any], done: Mapping[str, Any]) -> dict[str, Any]:
        values["home"] = values["home"] or str(AIRFLOW_HOME)
        host = connect_host(values["host"])
        values["base_url"] = values["base_url"] or f"http://{host}:{values['port']}"
        return values

    def run_url(self, dag_id: str, run_id: str) -> str:
        """Link to one DAG run in the Airflow 3 UI (alerts and results point here)."""
        from urllib.parse import quote

        return f"{self.base_url.rstrip('/')}/dags/{quote(dag_id)}/runs/{quote(run_id, safe='')}"


@dataclass(frozen=True)
class ValidationSettings:
    max_drift: float = setting(
        0.02, Fraction(), "largest relative difference between streaming and batch metrics")
    start_date: str | None = setting(
        None, IsoDate(), "first day daily_validation checks (required by that DAG)")
    data_docs: str = setting(
        None, OptionalText(), "where Great Expectations writes its data docs "
        "(default: <lake.root>/_data_docs)")

    @classmethod
    def finish(cls, values: dict[str, Any], done: Mapping[str, Any]) -> dict[str, Any]:
        values["data_docs"] = values["data_docs"] or f"{done['lake'].root.rstrip('/')}/_data_docs"
        return values


@dataclass(frozen=True)
class MonitorSettings:
    stale_after_ms: int = setting(
        "3m", Duration(minimum=1), "a job silent this long with input waiting is stale")
    max_lag: int = setting(
        100_000, PositiveInt(), "a job further behind its topics than this is lagging",
        unit="records")
    restart_limit: int = setting(
        3, PositiveInt(), "restarts allowed within monitor.restart_window", unit="restarts")
    restart_window_ms: int = setting(
        "30m", Duration(minimum=1), "the span over which restarts are counted")
    stop_timeout_ms: int = setting(
        "60s", Duration(minimum=1), "how long a stopping job may take before it is killed")
    jobs: tuple[str, ...] = setting(
        list(DEFAULT_DEPLOYED), Names(), "the streaming jobs the streaming_jobs DAG deploys")

    @classmethod
    def finish(cls, values: dict[str, Any], done: Mapping[str, Any]) -> dict[str, Any]:
        jobs = values["jobs"]
        unknown = [j for j in jobs if j not in JOB_NAMES]
        if unknown or len(set(jobs)) != len(jobs):
            raise ConfigError(
                f"monitor.jobs must name distinct streaming jobs among {', '.join(JOB_NAMES)}, "
                f"got {list(jobs)!r}"
            )
        values["jobs"] = tuple(j for j in JOB_NAMES if j in jobs)  # pipeline order
        return values


@dataclass(frozen=True)
class MaintenanceSettings:
    vacuum_retention_ms: int = setting(
        "7d", Duration(), "VACUUM deletes files unreferenced for longer than this")
    log_retention_ms: int = setting(
        "1m", Duration(minimum=1000), "streaming sinks' Delta tables keep their log commits "
        "this long (delta.logRetentionDuration; an append lists the whole log)")
    snapshots_kept: int = setting(
        288, PositiveInt(), "newest ramp snapshots kept", unit="snapshots")
    checkpoint_batches_kept: int = setting(
        100, PositiveInt(), "newest micro-batches Spark keeps in each job's checkpoint "
        "(spark.sql.streaming.minBatchesToRetain)", unit="batches")
