"""Alerts through every channel: the `alerts` Delta table, a local webhook, a local SMTP."""

from __future__ import annotations

import email
import logging
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers.receivers import smtp_receiver, webhook_receiver

from spark_jobs.control.alerts import Alert, send_alert
from spark_jobs.streaming.lake.delta import read_arrow

pytestmark = pytest.mark.integration

RUN_URL = "http://127.0.0.1:8080/dags/daily_validation/runs/manual__1"


def failed_drift(**changes) -> Alert:
    fields = dict(
        source="daily_validation", kind="drift", summary="max drift 5.0 % above 2.0 %",
        experiment_hash="exp1_single", experiment_group="control",
        window_end_ms=1_767_229_200_000, metric="volume/click", observed=0.05, threshold=0.02,
        run_url=RUN_URL,
    )
    fields.update(changes)
    return Alert(**fields)


def alerts_table(settings):
    return read_arrow(settings.lake.table("alerts")).to_pandas()


def test_webhook_receives_a_slack_compatible_message_and_the_table_a_row(make_settings, caplog):
    alert = failed_drift()
    with webhook_receiver() as (url, received):
        settings = make_settings(alerts={"webhook_url": url})
        with caplog.at_level(logging.WARNING, logger="tideline.alerts"):
            assert send_alert(settings, alert) == ["webhook", "log", "table"]
    logged = [r for r in caplog.records
              if r.name == "tideline.alerts" and r.levelno == logging.WARNING]
    assert len(logged) == 1  # the log line, whatever channels are configured
    assert alert.headline() in logged[0].getMessage()
    assert f"run: {RUN_URL}" in logged[0].getMessage()
    assert len(received) == 1
    body = received[0]
    assert body["text"].startswith("[tideline] daily_validation drift: max drift 5.0 %")
    assert RUN_URL in body["text"]
    assert body["alert"]["experiment_hash"] == "exp1_single"
    assert body["alert"]["observed"] == 0.05
    row = alerts_table(settings).iloc[0]
    assert (row.kind, row.experiment_group, row.channels) == ("drift", "control",
                                                             "webhook,log,table")


def test_a_failing_webhook_still_leaves_the_alert_in_the_table(make_settings, caplog):
    with webhook_receiver(status=500) as (url, received):
        settings = make_settings(alerts={"webhook_url": url, "webhook_timeout": "2s"})
        assert send_alert(settings, failed_drift()) == ["log", "table"]
    assert len(received) == 1
    row = alerts_table(settings).iloc[0]
    assert row.channels == "log,table" and "HTTP Error 500" in row.details
    assert "not sent by webhook" in caplog.text


def test_email_goes_through_airflows_smtp_settings(make_settings, monkeypatch):
    with smtp_receiver() as (port, messages):
        for key, value in {"SMTP_HOST": "127.0.0.1", "SMTP_PORT": str(port),
                           "SMTP_STARTTLS": "False", "SMTP_SSL": "False",
                           "SMTP_MAIL_FROM": "tideline@localhost"}.items():
            monkeypatch.setenv(f"AIRFLOW__SMTP__{key}", value)
        monkeypatch.setenv("AIRFLOW_CONN_SMTP_DEFAULT", "smtp://127.0.0.1")
        settings = make_settings(alerts={"email_to": ["oncall@example.org"]})
        assert send_alert(settings, failed_drift()) == ["email", "log", "table"]
    assert len(messages) == 1
    assert messages[0]["to"] == ["<oncall@example.org>"]
    mail = email.message_from_string(messages[0]["data"])
    assert mail["Subject"].startswith("[tideline] daily_validation drift: max drift 5.0 %")
    body = "".join(part.get_payload(decode=True).decode() for part in mail.walk()
                   if part.get_content_type() == "text/html")
    assert "observed 0.05 (limit 0.02)" in body and RUN_URL in body


def test_concurrent_alerts_from_parallel_tasks_are_all_kept(make_settings):
    settings = make_settings()
    alerts = [failed_drift(summary=f"case {i}") for i in range(6)]
    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(lambda a: send_alert(settings, a), alerts))
    table = alerts_table(settings)
    assert sorted(table.summary) == sorted(a.summary for a in alerts)
    assert table.alert_id.is_unique


@pytest.mark.parametrize("window_end_ms", [None, 0])
def test_optional_fields_may_be_empty(make_settings, window_end_ms):
    settings = make_settings()
    alert = Alert(source="streaming_jobs", kind="job_down", summary="x down",
                  window_end_ms=window_end_ms)
    send_alert(settings, alert)
    row = alerts_table(settings).iloc[0]
    assert row.experiment_hash is None
