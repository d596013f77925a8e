"""Alert channels as Airflow Connections (Airflow's AIRFLOW_CONN_<ID> JSON form, as an
operator's UI entry reaches a task), the `alerts` settings as the fallback."""

from __future__ import annotations

import email
import json

import pytest
from helpers.receivers import smtp_receiver, webhook_receiver

from spark_jobs.control.alerts import Alert, send_alert

pytestmark = pytest.mark.integration


def drift() -> Alert:
    return Alert(source="daily_validation", kind="drift", summary="max drift 5.0 % above 2.0 %",
                 run_url="http://af.example/dags/daily_validation/runs/r1")


def set_connection(monkeypatch, conn_id: str, **fields) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))


def test_the_webhook_connection_wins_over_the_url_setting(make_settings, monkeypatch):
    with webhook_receiver() as (conn_url, by_connection), \
            webhook_receiver() as (setting_url, by_setting):
        port = int(conn_url.rsplit(":", 1)[1].split("/")[0])
        set_connection(monkeypatch, "tideline_webhook", conn_type="http", host="127.0.0.1",
                       port=port, schema="http", extra={"endpoint": "hook"})
        settings = make_settings(alerts={"webhook_url": setting_url})
        assert send_alert(settings, drift()) == ["webhook", "log", "table"]
    assert [body["alert"]["kind"] for body in by_connection] == ["drift"]
    assert by_setting == []


def test_without_the_connection_the_url_setting_is_used(make_settings, monkeypatch):
    monkeypatch.delenv("AIRFLOW_CONN_TIDELINE_WEBHOOK", raising=False)
    with webhook_receiver() as (url, received):
        settings = make_settings(alerts={"webhook_url": url})
        assert send_alert(settings, drift()) == ["webhook", "log", "table"]
    assert len(received) == 1


def test_a_connection_id_of_the_settings_names_another_connection(make_settings, monkeypatch):
    with webhook_receiver() as (url, received):
        set_connection(monkeypatch, "team_hook", conn_type="http", host=url)  # a whole URL
        settings = make_settings(alerts={"webhook_conn_id": "team_hook"})
        assert send_alert(settings, drift()) == ["webhook", "log", "table"]
    assert len(received) == 1


def test_mail_goes_through_the_smtp_connection_to_its_recipients(make_settings, monkeypatch):
    with smtp_receiver() as (port, messages):
        set_connection(monkeypatch, "tideline_smtp", conn_type="smtp", host="127.0.0.1",
                       port=port, extra={"from_email": "tideline@localhost",
                                         "disable_ssl": True, "disable_tls": True,
                                         "to": "oncall@example.org, lead@example.org"})
        settings = make_settings()  # no email_to: the connection's recipients
        assert send_alert(settings, drift()) == ["email", "log", "table"]
    assert len(messages) == 1
    assert sorted(messages[0]["to"]) == ["<lead@example.org>", "<oncall@example.org>"]
    mail = email.message_from_string(messages[0]["data"])
    assert mail["Subject"].startswith("[tideline] daily_validation drift: max drift 5.0 %")
    assert mail["From"] == "tideline@localhost"


def test_webhook_target_reads_an_http_connection_as_httphook_does():
    from airflow.sdk import Connection

    from spark_jobs.control.alerts.connections import webhook_target

    conn = Connection(conn_id="w", conn_type="http", host="hooks.example.org", schema="https",
                      port=8443, login="bot", password="s3cret",
                      extra=json.dumps({"endpoint": "/services/T1", "headers": {"X-Team": "a"}}))
    url, headers = webhook_target(conn)
    assert url == "https://hooks.example.org:8443/services/T1"
    assert headers == {"X-Team": "a", "Authorization": "Basic Ym90OnMzY3JldA=="}
    slack = Connection(conn_id="s", conn_type="http", host="https://hooks.slack.com/services/X")
    assert webhook_target(slack) == ("https://hooks.slack.com/services/X", {})


def test_a_submitted_check_gets_the_connections_the_task_sees(make_settings, monkeypatch):
    from spark_jobs.control.submit import alert_connections

    set_connection(monkeypatch, "tideline_webhook", conn_type="http", host="h.example",
                   extra={"endpoint": "x"})
    monkeypatch.delenv("AIRFLOW_CONN_TIDELINE_SMTP", raising=False)
    forwarded = alert_connections(make_settings())
    assert list(forwarded) == ["AIRFLOW_CONN_TIDELINE_WEBHOOK"]
    assert json.loads(forwarded["AIRFLOW_CONN_TIDELINE_WEBHOOK"]) == {
        "conn_type": "http", "host": "h.example", "extra": {"endpoint": "x"}}
