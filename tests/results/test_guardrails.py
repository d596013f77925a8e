"""A significant guardrail drop of a running experiment is alerted once, through the
configured channels; wins, mismatched splits and ended experiments are not."""

from __future__ import annotations

import dataclasses

import pytest
from helpers.receivers import webhook_receiver

from spark_jobs.results.guardrails import check_guardrails, sent_keys
from spark_jobs.results.synthetic_metrics import KNOWN_EFFECTS, write_metrics
from spark_jobs.streaming.lake.delta import read_arrow

pytestmark = pytest.mark.integration

DURATIONS = {"period": "1d", "window": "1h"}


def test_a_guardrail_drop_is_alerted_once(make_settings):
    with webhook_receiver() as (url, received):
        settings = make_settings(experiments=DURATIONS, alerts={"webhook_url": url})
        write_metrics(settings)
        first = check_guardrails(settings, run_url="http://airflow/run")
        again = check_guardrails(settings)
    assert {(a.experiment_hash, a.experiment_group) for a in first} == {
        ("exp_guardrail", "treatment")}
    assert "impression propensity" in {a.metric for a in first}
    assert again == [], "the same drop is not alerted twice"
    assert len(received) == len(first)
    text = received[0]["text"]
    assert "exp_guardrail" in text and "significantly below control" in text
    assert "mSPRT" in text and "run" in received[0]["alert"]["run_url"]
    alert = first[0]
    assert alert.observed < alert.threshold, "treatment below control"
    rows = read_arrow(settings.lake.table("alerts")).to_pylist()
    assert {r["kind"] for r in rows} == {"guardrail_drop"} and len(rows) == len(first)
    assert len(sent_keys(settings)) == len(first)


def test_no_alert_without_guardrails_or_after_the_period(make_settings):
    settings = make_settings(experiments=DURATIONS, stats={"guardrail_events": []})
    write_metrics(settings)
    assert check_guardrails(settings) == []
    ended = make_settings(experiments=DURATIONS)
    write_metrics(ended, [dataclasses.replace(e, windows=24) for e in KNOWN_EFFECTS])
    assert check_guardrails(ended) == [], "the period is over: nothing left to shut down"


def test_the_bonferroni_method_alerts_too_and_says_so(make_settings):
    settings = make_settings(experiments=DURATIONS, stats={"method": "bonferroni"})
    write_metrics(settings)
    alerts = check_guardrails(settings)
    assert alerts and all("Bonferroni" in a.summary for a in alerts)
