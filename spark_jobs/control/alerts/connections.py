"""Alert channels configured as Airflow Connections, so an operator sets them in the UI
(Admin -> Connections) like any other Airflow integration.

- `alerts.webhook_conn_id` (default `tideline_webhook`): a connection of type HTTP (Generic
  when the HTTP provider is not installed), read as Airflow's HttpHook reads one: `host`
  holds a whole URL (e.g. a Slack incoming webhook), or a host name with `schema` as the URL
  scheme (http by default) and `port`; extra `endpoint` is the path, extra `headers` a dict
  of HTTP headers, `login`/`password` basic authentication.
- `alerts.smtp_conn_id` (default `tideline_smtp`): Airflow's SMTP connection (the smtp
  provider's SmtpHook: host, port, login, password, extra from_email/disable_ssl/
  disable_tls); the recipients are `alerts.email_to`, else the connection's extra `to`.

A connection is looked up through Airflow (`airflow.sdk.Connection.get`: in a task process
its environment variables, secrets backends and the metadata DB through the API server;
elsewhere `AIRFLOW_CONN_<ID>` variables). Without one the settings `alerts.webhook_url` and
`alerts.email_to` (TIDELINE_ALERTS__*) are the fallback.
"""

from __future__ import annotations

import base64
import logging
import os
import sys
from collections.abc import Mapping
from typing import Any

log = logging.getLogger("tideline.alerts")


def env_name(conn_id: str) -> str:
    """The environment variable Airflow reads a connection from."""
    return f"AIRFLOW_CONN_{conn_id.upper()}"


def lookup(conn_id: str | None) -> Any | None:
    """Airflow's connection `conn_id`, or None when it is not defined where this runs.

    Airflow is imported only when this process already runs Airflow (a task) or an
    AIRFLOW_CONN_ variable names the connection, so other processes pay nothing."""
    if not conn_id:
        return None
    if "airflow.sdk" not in sys.modules and env_name(conn_id) not in os.environ:
        return None
    try:
        from airflow.sdk import Connection
        from airflow.sdk.exceptions import AirflowNotFoundException
    except ImportError:
        return None
    try:
        return Connection.get(conn_id)
    except AirflowNotFoundException:
        return None
    except Exception as exc:  # a broken backend must not stop the alert: use the settings
        log.warning("connection %s could not be read (%s): using the alerts settings",
                    conn_id, exc)
        return None


def webhook_target(conn: Any) -> tuple[str, dict[str, str]]:
    """(URL, headers) of a webhook connection, read as HttpHook reads an HTTP connection."""
    extra: Mapping[str, Any] = conn.extra_dejson
    host = (conn.host or "").strip()
    if "://" in host:
        url = host
    else:
        url = f"{conn.schema or 'http'}://{host}" + (f":{conn.port}" if conn.port else "")
    if endpoint := str(extra.get("endpoint") or ""):
        url = url.rstrip("/") + "/" + endpoint.lstrip("/")
    headers = {str(k): str(v) for k, v in (extra.get("headers") or {}).items()}
    if conn.login:
        token = base64.b64encode(f"{conn.login}:{conn.password or ''}".encode()).decode()
        headers.setdefault("Authorization", f"Basic {token}")
    return url, headers


def recipients(conn: Any) -> tuple[str, ...]:
    """Recipients in an SMTP connection's extra `to` (a list or comma-separated text)."""
    value = conn.extra_dejson.get("to") or []
    if isinstance(value, str):
        value = value.split(",")
    return tuple(address.strip() for address in value if address.strip())


def forwarded_environment(conn_ids: list[str | None]) -> dict[str, str]:
    """AIRFLOW_CONN_<ID> variables (Airflow's JSON form) of the connections resolvable here,
    for a child process (a spark-submitted check) that cannot reach Airflow's API itself."""
    forwarded = {}
    for conn_id in conn_ids:
        conn = lookup(conn_id)
        if conn is not None and conn_id:
            forwarded[env_name(conn_id)] = conn.as_json()
    return forwarded
