"""Where alerts go: a Slack-compatible webhook and e-mail through Airflow's SMTP.

The `alerts` table and the log line are written by `dispatch.send_alert` for every alert;
these optional channels come from Airflow Connections (`connections.py`) or, without them,
from the `alerts` settings section.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Protocol

from spark_jobs.control.alerts.connections import lookup, recipients, webhook_target
from spark_jobs.control.alerts.model import Alert
from spark_jobs.settings import AlertSettings


class AlertChannel(Protocol):
    name: str

    def send(self, alert: Alert) -> None:
        """Deliver the alert or raise; the dispatcher logs failures and goes on."""


class WebhookChannel:
    """POSTs `{"text": ..., "alert": {...}}`: Slack's incoming-webhook form plus the fields."""

    name = "webhook"

    def __init__(self, url: str, timeout_s: float,
                 headers: Mapping[str, str] | None = None) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"a webhook needs an http(s) URL, got {url!r}")
        self.url = url
        self.timeout_s = timeout_s
        self.headers = {**(headers or {}), "Content-Type": "application/json"}

    def send(self, alert: Alert) -> None:
        body = json.dumps({"text": alert.text(), "alert": alert.to_json()}).encode("utf-8")
        request = urllib.request.Request(self.url, data=body, method="POST", headers=self.headers)
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            if not 200 <= response.status < 300:
                raise urllib.error.HTTPError(
                    self.url, response.status, "webhook refused the alert", response.headers, None
                )


class EmailChannel:
    """E-mail with Airflow's [smtp] settings (host, port, TLS, sender, smtp_default login)."""

    name = "email"

    def __init__(self, recipients: tuple[str, ...]) -> None:
        self.recipients = list(recipients)

    def send(self, alert: Alert) -> None:
        from airflow.utils.email import send_email_smtp

        html = "<pre>" + _escape(alert.text()) + "</pre>"
        send_email_smtp(self.recipients, alert.headline(), html)


class SmtpConnectionChannel:
    """E-mail through an Airflow SMTP connection (the smtp provider's SmtpHook)."""

    name = "email"

    def __init__(self, conn_id: str, recipients: tuple[str, ...]) -> None:
        self.conn_id = conn_id
        self.recipients = list(recipients)

    def send(self, alert: Alert) -> None:
        from airflow.providers.smtp.hooks.smtp import SmtpHook

        html = "<pre>" + _escape(alert.text()) + "</pre>"
        with SmtpHook(smtp_conn_id=self.conn_id) as hook:
            hook.send_email_smtp(to=self.recipients, subject=alert.headline(), html_content=html)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def configured_channels(settings: AlertSettings) -> list[AlertChannel]:
    """The optional channels, in delivery order: each from its Airflow connection when one
    is defined, else from the settings."""
    channels: list[AlertChannel] = []
    timeout_s = settings.webhook_timeout_ms / 1000
    if (webhook := lookup(settings.webhook_conn_id)) is not None:
        url, headers = webhook_target(webhook)
        channels.append(WebhookChannel(url, timeout_s, headers))
    elif settings.webhook_url:
        channels.append(WebhookChannel(settings.webhook_url, timeout_s))
    smtp = lookup(settings.smtp_conn_id)
    to = settings.email_to or (recipients(smtp) if smtp is not None else ())
    if smtp is not None and to and settings.smtp_conn_id:
        channels.append(SmtpConnectionChannel(settings.smtp_conn_id, to))
    elif settings.email_to:
        channels.append(EmailChannel(settings.email_to))
    return channels
