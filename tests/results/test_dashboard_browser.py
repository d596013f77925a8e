"""A person's look at the results dashboard, in headless Chromium: the experiments with their
status badges, `#exp_win` deep-linked with its verdict, charts and bands, another experiment
picked from the list, then new windows landing while the page is open: it refreshes by itself.
And an experiment with provisional rows only: its live results marked as provisional, updated
when a new provisional row lands, until its final windows take over.
Screenshots go to test-artifacts/dashboard-*.png.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from helpers.browser import chromium, screenshot

from spark_jobs.results.dashboard.results import NO_FINAL_WINDOW
from spark_jobs.results.dashboard.server import DashboardServer
from spark_jobs.results.synthetic_metrics import (
    KNOWN_EFFECTS,
    START_MS,
    SyntheticExperiment,
    add_synthetic_ramps,
    write_metrics,
    write_provisional,
)
from spark_jobs.results.verdicts import STATUSES

pytestmark = pytest.mark.e2e

HOUR = 3_600_000
EXPECTED = {"exp_aa": "none", "exp_guardrail": "loss", "exp_srm": "srm", "exp_win": "win"}
CONFIG = {"experiments": {"period": "1d", "window": "1h"}, "dashboard": {"refresh": "1s"}}
TIMEOUT_S = 20
CHARTS = ("chart-propensity", "chart-volume", "chart-lift-propensity", "chart-lift-volume")


@pytest.fixture(scope="module")
def browser() -> Iterator:
    with chromium() as driver:
        yield driver


def wait(driver, condition, timeout_s: float = TIMEOUT_S):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout_s).until(condition)


def css(driver, selector: str):
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)


def shows(driver, experiment: str, status: str) -> bool:
    verdict = css(driver, f"#experiment[data-experiment='{experiment}'] #verdict")
    return bool(verdict) and verdict[0].get_attribute("data-status") == status


def chart_traces(driver, chart: str) -> list[dict]:
    """The Plotly traces drawn in a chart (name, fill, dash, points)."""
    return driver.execute_script(
        "return document.getElementById(arguments[0]).data.map(t => ({name: t.name,"
        " fill: t.fill || 'none', dash: (t.line || {}).dash || 'solid', points: t.x.length}))",
        chart)


def test_statuses_verdict_charts_and_refresh_without_reload(make_settings, browser):
    settings = make_settings(**CONFIG)
    write_metrics(settings, KNOWN_EFFECTS, windows=10)
    with DashboardServer(settings, port=0) as server:
        browser.get(server.url)
        wait(browser, lambda d: len(css(d, "#experiments li[data-experiment]")) == 4)
        items = css(browser, "#experiments li[data-experiment]")
        badges = {i.get_attribute("data-experiment"): i.find_element("css selector", ".status")
                  for i in items}
        assert {name: b.get_attribute("data-status") for name, b in badges.items()} == EXPECTED
        assert {name: b.text for name, b in badges.items()} == {
            name: STATUSES[status] for name, status in EXPECTED.items()}
        assert all(i.get_attribute("data-running") == "true" for i in items)
        screenshot(browser, "dashboard-1-list")

        browser.get("about:blank")  # a fresh load of the deep link
        browser.get(server.url + "#exp_win")
        wait(browser, lambda d: shows(d, "exp_win", "win"))
        assert css(browser, "#verdict-label")[0].text == "significant win"
        assert css(browser, "#verdict-test")[0].text == "mSPRT (always-valid sequential test)"
        assert "click propensity of treatment" in css(browser, "#verdict-reason")[0].text
        # the event type of the win is selected; impression is a guardrail
        selected = css(browser, "#event-types button[aria-selected='true']")
        assert [b.get_attribute("data-event-type") for b in selected] == ["click"]
        wait(browser, lambda d: len(css(d, ".js-plotly-plot svg.main-svg")) >= 2 * len(CHARTS))
        for chart in CHARTS:
            assert css(browser, f"#{chart}.js-plotly-plot svg.main-svg"), chart
        for chart in CHARTS[:2]:  # one shaded band per group, 10 windows each
            traces = chart_traces(browser, chart)
            bands = [t for t in traces if t["fill"] == "tonexty"]
            assert [t["name"] for t in bands] == ["control 95% interval",
                                                  "treatment 95% interval"]
            assert {t["points"] for t in traces} == {10}
        for chart in CHARTS[2:]:  # the verdict's test shaded, the other one dashed
            names = {t["name"]: t for t in chart_traces(browser, chart)}
            assert names["sequential (mSPRT)"]["fill"] == "tonexty"
            assert names["Bonferroni"]["dash"] == "dash"
            assert "difference" in names
        assert css(browser, "#chart-propensity path.js-fill")  # the bands are drawn
        rows = css(browser, "#comparisons tbody tr")
        up = {(r.get_attribute("data-event-type"), r.get_attribute("data-metric"))
              for r in rows if r.get_attribute("data-direction") == "up"}
        assert up == {("click", "propensity"), ("click", "volume")}
        assert len(rows) == 4 and len(css(browser, "#comparisons tbody .tag.guardrail")) == 2
        click_rate = next(r for r in rows if (r.get_attribute("data-event-type"),
                                              r.get_attribute("data-metric")) == ("click",
                                                                                  "propensity"))
        cells = {c.get_attribute("data-cell"): c.text for c in click_rate.find_elements(
            "css selector", "td[data-cell]")}
        assert cells["difference"].startswith("+") and " pp" in cells["difference"]
        assert cells["lift"].startswith("+") and "%" in cells["lift"]
        assert " · " in cells["plan"] and cells["plan"].startswith("±")
        # CUPED: the adjusted difference, its interval and the variance it removed
        cuped = " ".join(cells["cuped"].split())  # the cell wraps its parts
        assert cuped.startswith("+") and " pp [+" in cuped and cuped.endswith("%")
        assert " · −" in cuped
        plan = css(browser, "#verdict-plan")[0]
        assert float(plan.get_attribute("data-progress")) > 0
        assert "of target" in plan.text or "target reached" in plan.text
        screenshot(browser, "dashboard-2-exp-win")
        browser.execute_script("arguments[0].scrollIntoView()", css(browser, ".table-card")[0])
        screenshot(browser, "dashboard-2b-comparisons")  # difference, lift, p-values, MDE
        browser.execute_script("const t = arguments[0]; t.scrollLeft = t.scrollWidth",
                               css(browser, ".table-scroll")[-1])
        screenshot(browser, "dashboard-2c-cuped")  # the CUPED column, scrolled into view
        browser.execute_script("window.scrollTo(0, 0)")

        css(browser, "li[data-experiment='exp_guardrail'] a")[0].click()
        wait(browser, lambda d: shows(d, "exp_guardrail", "loss"))
        assert browser.current_url.endswith("#exp_guardrail")
        assert css(browser, "li.selected")[0].get_attribute("data-experiment") == "exp_guardrail"
        css(browser, "#event-types button[data-event-type='impression']")[0].click()
        wait(browser, lambda d: len(css(d, "#comparisons tr.current")) == 2)

        as_of = css(browser, "#as-of")[0]
        assert as_of.get_attribute("data-as-of") == str(START_MS + 10 * HOUR)
        assert "data up to 2026-01-01 10:00 UTC" in as_of.text
        browser.execute_script("window.notReloaded = true")
        write_metrics(settings, KNOWN_EFFECTS, windows=12, ramps=False)
        wait(browser, lambda d: css(d, "#as-of")[0].get_attribute("data-as-of")
             == str(START_MS + 12 * HOUR))
        assert "data up to 2026-01-01 12:00 UTC" in css(browser, "#as-of")[0].text
        assert browser.execute_script("return window.notReloaded === true")
        assert shows(browser, "exp_guardrail", "loss")  # the selection survived the refresh
        wait(browser, lambda d: {t["points"] for t in chart_traces(d, "chart-propensity")}
             == {12})
        screenshot(browser, "dashboard-3-refreshed")
        assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]

        browser.get(server.url + "#exp_nope")  # the page's fetch of it is a 404
        wait(browser, lambda d: 'No experiment "exp_nope"' in css(d, "#placeholder")[0].text)


def test_an_empty_lake_shows_a_page_that_says_so(make_settings, browser):
    with DashboardServer(make_settings(**CONFIG), port=0) as server:
        browser.get(server.url)
        wait(browser, lambda d: css(d, "#no-experiments"))
        assert "no data yet" in css(browser, "#as-of")[0].text
        screenshot(browser, "dashboard-4-empty")


def text_of(driver, selector: str) -> str | None:
    found = css(driver, selector)
    return found[0].text if found else None


def test_live_results_are_marked_provisional_and_update_when_a_row_lands(make_settings,
                                                                          browser):
    settings = make_settings(**CONFIG)
    live = SyntheticExperiment("exp_live", {"click": (0.20, 0.35), "impression": (0.6, 0.6)},
                               users_per_window=(300, 300), windows=6)
    write_provisional(settings, [live], windows=2)  # no window final yet
    add_synthetic_ramps(settings, [live])
    browser.get_log("browser")  # drop the earlier tests' messages
    with DashboardServer(settings, port=0) as server:
        browser.get(server.url)
        wait(browser, lambda d: text_of(d, "#live-users") == "control 600 · treatment 600")
        item = css(browser, "li[data-experiment='exp_live']")[0]
        assert item.get_attribute("data-final") == "false"
        assert item.find_element("css selector", ".tag.live").text == "live only"
        assert css(browser, "#live .live-badge")[0].text == (
            "Live · provisional, includes open windows")
        assert text_of(browser, "#verdict-reason") == NO_FINAL_WINDOW
        assert "no window final yet" in text_of(browser, "#live-updated")
        assert len(css(browser, "#live-comparisons tbody tr")) == 4
        assert css(browser, "#final-table")[0].get_attribute("hidden") is not None
        screenshot(browser, "dashboard-provisional-1-live-only")

        browser.execute_script("window.notReloaded = true")
        write_provisional(settings, [live], windows=6)  # larger counts land
        wait(browser, lambda d: text_of(d, "#live-users") == "control 1,800 · treatment 1,800")
        wait(browser, lambda d: css(d, "#live")[0].get_attribute("data-status") == "win")
        assert text_of(browser, "#live-status .status") == "significant win"
        assert browser.execute_script("return window.notReloaded === true")
        screenshot(browser, "dashboard-provisional-2-updated")

        # the windows become final with the same totals: the final verdict, no duplicate
        write_metrics(settings, [live], windows=6, ramps=False)
        wait(browser, lambda d: shows(d, "exp_live", "win") and not css(d, "#live")[0]
             .is_displayed())
        assert text_of(browser, "#verdict-label") == "significant win"
        screenshot(browser, "dashboard-provisional-3-final")
        assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
