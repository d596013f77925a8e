"""Alerts of failed validations and unhealthy jobs: `alerts` table, log, webhook, e-mail."""

from spark_jobs.control.alerts.dispatch import send_alert
from spark_jobs.control.alerts.model import ALERTS_SCHEMA, Alert

__all__ = ["ALERTS_SCHEMA", "Alert", "send_alert"]
