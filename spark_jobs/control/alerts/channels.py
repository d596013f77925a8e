"""Where alerts go: a Slack-compatible webhook and e-mail through Airflow's SMTP settings.

The `alerts` table and the log line are written by `dispatch.send_alert` for every alert;
these optional channels are configured in the `alerts` settings section.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Protocol

from spark_jobs.control.alerts.model import Alert
from spark_jobs.settings import AlertSettings


class AlertChannel(Protocol):
    name: str

    def send(self, alert: Alert) -> None:
        """Deliver the alert or raise; the dispatcher logs failures and goes on."""


class WebhookChannel:
    """POSTs `{"text": ..., "alert": {...}}`: Slack's incoming-webhook form plus the fields."""

    name = "webhook"

    def __init__(self, url: str, timeout_s: float) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"alerts.webhook_url must be an http(s) URL, got {url!r}")
        self.url = url
        self.timeout_s = timeout_s

    def send(self, alert: Alert) -> None:
        body = json.dumps({"text": alert.text(), "alert": alert.to_json()}).encode("utf-8")
        request = urllib.request.Request(
            self.url, data=body, method="POST", headers={"Content-Type": "application/json"}
        )
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


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def configured_channels(settings: AlertSettings) -> list[AlertChannel]:
    """The optional channels the settings turn on, in delivery order."""
    channels: list[AlertChannel] = []
    if settings.webhook_url:
        channels.append(WebhookChannel(settings.webhook_url, settings.webhook_timeout_ms / 1000))
    if settings.email_to:
        channels.append(EmailChannel(settings.email_to))
    return channels
