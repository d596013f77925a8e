"""The dashboard over HTTP (uvicorn on 127.0.0.1, as `tideline dashboard` serves it) on the
synthetic metrics table of known effects: statuses, series, 404s, offline assets, refresh."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from spark_jobs.results.dashboard.api import describe_test
from spark_jobs.results.dashboard.results import load_results
from spark_jobs.results.dashboard.server import DashboardServer
from spark_jobs.results.synthetic_metrics import (
    KNOWN_EFFECTS,
    START_MS,
    SyntheticExperiment,
    write_metrics,
    write_provisional,
)
from spark_jobs.results.verdicts import STATUSES
from spark_jobs.settings import Settings, load_settings

pytestmark = pytest.mark.integration

HOUR = 3_600_000
EXPECTED = {"exp_win": "win", "exp_guardrail": "loss", "exp_srm": "srm", "exp_aa": "none"}
CONFIG = {"experiments": {"period": "1d", "window": "1h"}, "dashboard": {"refresh": "1s"}}


def fetch(url: str) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def get_json(url: str) -> Any:
    status, _, body = fetch(url)
    assert status == 200, body
    return json.loads(body)


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory) -> Iterator[str]:
    """One dashboard over 12 hourly windows of a one-day period (the experiments run)."""
    settings = load_settings(environ={}, overrides={
        **CONFIG, "lake": {"root": str(tmp_path_factory.mktemp("dashboard") / "lake")},
    })
    write_metrics(settings, KNOWN_EFFECTS, windows=12)
    with DashboardServer(settings, port=0) as server:
        yield server.url


def test_the_list_has_each_experiment_with_its_status_and_headline(dashboard):
    data = get_json(dashboard + "api/experiments")
    assert (data["as_of"], data["refresh_ms"], data["method"], data["alpha"]) == (
        START_MS + 12 * HOUR, 1000, "sequential", 0.05)
    experiments = {e["hash"]: e for e in data["experiments"]}
    assert {h: e["status"] for h, e in experiments.items()} == EXPECTED
    for experiment in experiments.values():
        assert experiment["label"] == STATUSES[experiment["status"]]
        assert experiment["running"] is True
        assert experiment["period_end"] - experiment["period_start"] == 24 * HOUR
        assert experiment["test"] == "mSPRT (always-valid sequential test)"
        assert (experiment["looks"], experiment["planned_looks"]) == (12, 25)
    assert experiments["exp_srm"]["srm_p"] < 0.001
    for experiment in experiments.values():  # progress toward the target sample size
        plan = experiment["plan"]
        assert (plan["target_mde"], plan["target_power"]) == (0.05, 0.8)
        assert plan["progress"] > 0 and plan["control_users"] > 0 and 0 < plan["power"] < 1
        assert plan["metric_label"] in ("propensity rate", "actions per triggered user")
    assert experiments["exp_srm"]["triggered_users"] == {"control": 1800, "treatment": 2280}
    win = experiments["exp_win"]["headline"]
    assert (win["event_type"], win["significant"], win["direction"]) == ("click", True, "up")
    assert win["lift_low"] > 0 and win["lift"] > win["lift_low"] and win["lift_high"] > win["lift"]
    assert 0 < win["difference_low"] < win["difference"] < win["difference_high"]
    loss = experiments["exp_guardrail"]["headline"]
    assert (loss["event_type"], loss["guardrail"], loss["direction"]) == ("impression", True,
                                                                          "down")
    assert loss["lift"] < 0


def test_the_detail_has_each_groups_bands_and_the_comparisons(dashboard):
    data = get_json(dashboard + "api/experiments/exp_win")
    assert (data["hash"], data["status"], data["label"]) == ("exp_win", "win", "significant win")
    assert data["event_types"] == ["impression", "click"]  # critical_event_types' order
    verdict = data["experiment"]["verdict"]
    assert (verdict["looks"], verdict["comparisons"]) == (12, 4)
    for group in ("control", "treatment"):
        band = verdict["bands"][group]["click"]["propensity"]
        assert band["window_end"] == [START_MS + k * HOUR for k in range(1, 13)]
        assert all(lo <= v <= hi for lo, v, hi in zip(band["low"], band["value"], band["high"],
                                                       strict=True))
    metrics = {(m["event_type"], m["metric"]): m for m in verdict["metrics"]}
    for metric in ("propensity", "volume"):
        click = metrics[("click", metric)]
        assert click["significant"] and click["lift"] > 0 and len(click["difference"]) == 12
        assert not metrics[("impression", metric)]["significant"]
        # CUPED from the rows' pre-exposure sums (tests/results/test_cuped.py: its numbers)
        assert 0 < click["cuped_low"] < click["cuped_difference"] < click["cuped_high"]
        assert 0 < click["cuped_reduction"] < 1
    guardrail = get_json(dashboard + "api/experiments/exp_guardrail")["experiment"]["verdict"]
    drop = next(m for m in guardrail["metrics"]
                if (m["event_type"], m["metric"]) == ("impression", "propensity"))
    assert drop["guardrail"] and drop["direction"] == "down" and drop["lift"] < 0


def test_an_unknown_experiment_is_a_404_that_says_so(dashboard):
    status, _, body = fetch(dashboard + "api/experiments/exp_nope")
    assert status == 404
    assert json.loads(body) == {"detail": "no experiment 'exp_nope' in experiment_metrics"}


def test_the_page_and_its_assets_are_served_locally(dashboard):
    status, _, page = fetch(dashboard)
    html = page.decode()
    assert status == 200 and "<title>Tideline · Experiment results</title>" in html
    assets = re.findall(r'<(?:script|link)\b[^>]*?(?:src|href)="([^"]*)"', html)
    assert "static/plotly.min.js" in assets
    assert not [a for a in assets if re.match(r"(https?:)?//", a)], assets
    for asset in assets:
        if not asset.startswith("data:"):
            assert fetch(dashboard + asset)[0] == 200, asset
    status, headers, plotly = fetch(dashboard + "static/plotly.min.js")
    assert status == 200 and len(plotly) > 1_000_000
    assert "javascript" in headers["content-type"] and b"plotly.js v" in plotly[:200]
    assert get_json(dashboard + "healthz") == {"ok": True}


def test_new_windows_invalidate_the_cache(make_settings):
    """Like the streaming job landing windows 11 and 12 (the synthetic series have 12)."""
    settings: Settings = make_settings(**CONFIG)
    write_metrics(settings, KNOWN_EFFECTS, windows=10)
    with DashboardServer(settings, port=0) as server:
        before = get_json(server.url + "api/experiments")
        assert get_json(server.url + "api/experiments") == before  # cached: same load
        write_metrics(settings, KNOWN_EFFECTS, windows=12, ramps=False)
        after = get_json(server.url + "api/experiments")
        assert after["as_of"] == before["as_of"] + 2 * HOUR == START_MS + 12 * HOUR
        assert after["table_version"] > before["table_version"]
        assert after["loaded_at"] >= before["loaded_at"]
        assert {e["hash"]: e["looks"] for e in after["experiments"]} == dict.fromkeys(EXPECTED, 12)
        detail = get_json(server.url + "api/experiments/exp_win")["experiment"]
        assert detail["latest_window_end"] == START_MS + 12 * HOUR


def test_provisional_rows_bring_live_results_and_new_experiments(make_settings):
    """experiment_metrics_provisional read beside the final table: missing at first (no live
    results, no error), then live looks after the final ones and an experiment that has no
    final window yet; each new version of it is picked up."""
    settings: Settings = make_settings(**CONFIG)
    write_metrics(settings, KNOWN_EFFECTS[:2], windows=10)
    with DashboardServer(settings, port=0) as server:
        before = get_json(server.url + "api/experiments")
        assert before["live_version"] is None
        assert [e["live"] for e in before["experiments"]] == [None, None]
        write_provisional(settings, KNOWN_EFFECTS[:2], windows=12, watermark=START_MS + 10 * HOUR)
        live = {e["hash"]: e["live"] for e in get_json(server.url + "api/experiments")[
            "experiments"]}
        assert {h: (e["status"], e["looks"]) for h, e in live.items()} == {
            "exp_win": ("win", 11), "exp_guardrail": ("loss", 11)}
        newcomer = SyntheticExperiment("exp_new", {"click": (0.2, 0.2)})
        write_provisional(settings, [newcomer], windows=1)
        after = get_json(server.url + "api/experiments")
        assert after["live_version"] == 1 and after["as_of"] == before["as_of"]
        new = next(e for e in after["experiments"] if e["hash"] == "exp_new")
        assert (new["final"], new["reason"]) == (False, "no window is final yet: live results only")
        assert new["live"]["triggered_users"] == {"control": 150, "treatment": 150}
        detail = get_json(server.url + "api/experiments/exp_new")
        assert detail["live"]["verdict"]["bands"]["control"]["click"]["propensity"][
            "window_end"] == [START_MS + HOUR]


def test_an_empty_lake_lists_nothing_and_the_page_still_loads(make_settings):
    with DashboardServer(make_settings(**CONFIG), port=0) as server:
        data = get_json(server.url + "api/experiments")
        assert (data["experiments"], data["as_of"], data["table_version"]) == ([], None, None)
        assert fetch(server.url)[0] == 200
        assert fetch(server.url + "api/experiments/exp_win")[0] == 404


def test_the_bonferroni_verdict_names_its_looks_and_comparisons(make_settings):
    settings = make_settings(**CONFIG, stats={"method": "bonferroni"})
    write_metrics(settings)
    verdict = load_results(settings).find("exp_win").verdict
    # the planned looks, as the verdict counts them: 24 hourly windows in a day, plus one
    assert (verdict.planned_looks, verdict.comparisons) == (25, 4)
    assert describe_test(verdict, settings) == "Bonferroni over 25 looks × 4 comparisons"
