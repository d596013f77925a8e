"""Send an alert: optional channels first, then always a log line and an `alerts` row.

A broken webhook or mail server must not hide the alert, so channel failures are logged
and recorded in the row (`channels` lists only those that delivered).
"""

from __future__ import annotations

import logging

from spark_jobs.contracts.tables import TABLE_ALERTS
from spark_jobs.control.alerts.channels import configured_channels
from spark_jobs.control.alerts.model import Alert, alert_rows
from spark_jobs.settings import Settings
from spark_jobs.streaming.lake.delta import append_rows

log = logging.getLogger("tideline.alerts")


def send_alert(settings: Settings, alert: Alert) -> list[str]:
    """Deliver one alert; returns the channels that took it (always ends with log, table)."""
    delivered: list[str] = []
    for channel in configured_channels(settings.alerts):
        try:
            channel.send(alert)
            delivered.append(channel.name)
        except Exception as exc:  # any channel failure is reported, not raised
            log.error("alert %s not sent by %s: %s", alert.alert_id, channel.name, exc)
            alert.details.setdefault("channel_errors", {})[channel.name] = str(exc)
    log.warning("%s", alert.text().replace("\n", " | "))
    delivered += ["log", "table"]
    append_rows(settings.lake.table(TABLE_ALERTS), alert_rows([alert], delivered))
    return delivered
