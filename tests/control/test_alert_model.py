"""The alert text says what failed, where, by how much, and links to the run."""

from __future__ import annotations

import json

import pytest

from spark_jobs.control.alerts import ALERTS_SCHEMA, Alert
from spark_jobs.control.alerts.channels import EmailChannel, WebhookChannel, configured_channels
from spark_jobs.control.alerts.model import alert_rows
from spark_jobs.settings import ConfigError, load_settings

WINDOW_END = 1_767_229_200_000  # 2026-01-01T01:00:00Z


def drift_alert(**changes) -> Alert:
    fields = dict(
        source="daily_validation", kind="drift", summary="streaming differs from batch by 5.0 %",
        experiment_hash="exp3_reramp", experiment_group="treatment", window_end_ms=WINDOW_END,
        metric="volume/click", observed=0.05, threshold=0.02,
        run_url="http://127.0.0.1:8080/dags/daily_validation/runs/r1",
    )
    fields.update(changes)
    return Alert(**fields)


def test_text_names_the_check_the_group_the_window_the_size_and_the_run():
    text = drift_alert().text()
    assert text.splitlines()[0] == (
        "[tideline] daily_validation drift: streaming differs from batch by 5.0 % "
        "(exp3_reramp/treatment, window ending 2026-01-01T01:00:00Z, volume/click)"
    )
    assert "observed 0.05 (limit 0.02)" in text
    assert text.endswith("run: http://127.0.0.1:8080/dags/daily_validation/runs/r1")


def test_an_alert_about_a_job_has_no_experiment_part():
    alert = Alert(source="streaming_jobs", kind="job_down", summary="filter_events is not running")
    assert alert.text() == "[tideline] streaming_jobs job_down: filter_events is not running"


@pytest.mark.parametrize("missing", ["source", "kind", "summary"])
def test_an_alert_needs_source_kind_and_summary(missing):
    with pytest.raises(ValueError, match=missing):
        drift_alert(**{missing: ""})


def test_rows_follow_the_table_schema_and_keep_details_as_json():
    alert = drift_alert(details={"rows": 3})
    rows = alert_rows([alert], ["webhook", "log", "table"])
    assert rows.schema == ALERTS_SCHEMA
    row = rows.to_pylist()[0]
    assert row["window_end"] == WINDOW_END and row["channels"] == "webhook,log,table"
    assert json.loads(row["details"]) == {"rows": 3}
    assert alert.alert_id != drift_alert().alert_id


def test_channels_follow_the_settings():
    assert configured_channels(load_settings(environ={}).alerts) == []
    settings = load_settings(environ={}, overrides={"alerts": {
        "webhook_url": "http://127.0.0.1:1/x", "email_to": "a@x.org, b@y.org"}})
    webhook, email = configured_channels(settings.alerts)
    assert isinstance(webhook, WebhookChannel) and webhook.timeout_s == 10
    assert isinstance(email, EmailChannel) and email.recipients == ["a@x.org", "b@y.org"]


def test_wrong_alert_settings_fail_at_start_with_what_to_fix():
    with pytest.raises(ConfigError, match=r"alerts\.email_to must be a list of e-mail"):
        load_settings(environ={}, overrides={"alerts": {"email_to": ["not-an-address"]}})
    with pytest.raises(ConfigError, match=r"alerts\.webhook_url must be an http"):
        load_settings(environ={}, overrides={"alerts": {"webhook_url": "ftp://x"}})
