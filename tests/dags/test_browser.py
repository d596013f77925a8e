"""A person's path through the Airflow UI, in headless Chromium: log in with the generated
password, see the seven DAGs, trigger `daily_validation` from its page, watch the run succeed,
open the run's Validation tab (the Tideline plugin) with its Data Docs links, then the
plugin's jobs and filtered validation pages and the results dashboard it serves behind
Airflow's login (the history lake's experiments with their verdicts). Screenshots of each
step go to test-artifacts/ at the repo root.

A manual run from the UI carries a logical date (the moment of the click) and, with the
DAG's data-interval timetable, the last complete day before it, which it validates.
"""

from __future__ import annotations

import datetime
import shutil
import time
from collections.abc import Iterator

import pytest
from helpers.airflow_setup import ARTIFACTS

from spark_jobs.control.orchestration.environment import DAG_IDS
from spark_jobs.results.verdicts import STATUSES

pytestmark = pytest.mark.airflow

CHROMEDRIVER = "/usr/bin/chromedriver"
CHROME_ARGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--window-size=1400,1000",
)
UI_TIMEOUT_S = 30
RUN_TIMEOUT_S = 300


@pytest.fixture
def browser() -> Iterator:
    if not (shutil.which("chromium") and shutil.which(CHROMEDRIVER)):
        pytest.fail("chromium and chromedriver are missing: run infra/setup.sh")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for argument in CHROME_ARGS:
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(UI_TIMEOUT_S)
    try:
        yield driver
    finally:
        driver.quit()


def screenshot(driver, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / f"airflow-ui-{name}.png"))


def log_in(driver, url: str, password: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url)
    wait = WebDriverWait(driver, UI_TIMEOUT_S)
    wait.until(expected_conditions.presence_of_element_located((By.NAME, "username")))
    screenshot(driver, "1-login")
    driver.find_element(By.NAME, "username").send_keys("admin")
    driver.find_element(By.NAME, "password").send_keys(password)
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait.until(lambda d: "/auth/login" not in d.current_url)


def run_state_badge(driver, run_id: str) -> str | None:
    """The state shown beside the run id in the run page's header (None while running)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    title = f"//*[normalize-space(text())='{run_id}']/.."
    try:  # the page re-renders while the run progresses: a stale element means "look again"
        rows = [row.text.split("\n") for row in driver.find_elements(By.XPATH, title)]
    except StaleElementReferenceException:
        return None
    return next((s for s in ("Success", "Failed") for row in rows if s in row), None)


def wait_for_run_state(driver, run_id: str, timeout_s: float) -> str:
    """Reload the run page until its header shows a final state; returns it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = run_state_badge(driver, run_id)
        if state is not None:
            return state
        time.sleep(5)
        driver.refresh()
    raise AssertionError(f"the page of run {run_id} shows no final state after {timeout_s} s")


def test_log_in_see_dags_trigger_validation_and_see_it_succeed(running_airflow, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    url = running_airflow.standalone.local_url
    wait = WebDriverWait(browser, UI_TIMEOUT_S)
    log_in(browser, f"{url}/dags", running_airflow.password)

    wait.until(lambda d: all(dag_id in d.page_source for dag_id in DAG_IDS))
    screenshot(browser, "2-dags")

    browser.get(f"{url}/dags/daily_validation")
    trigger = (By.CSS_SELECTOR, "[data-testid=trigger-dag-button]")
    wait.until(expected_conditions.element_to_be_clickable(trigger)).click()
    confirm = (By.XPATH, "//*[@role='dialog']//button[normalize-space()='Trigger']")
    wait.until(expected_conditions.element_to_be_clickable(confirm))
    screenshot(browser, "3-trigger-form")
    clicked_at = datetime.datetime.now(datetime.UTC)
    browser.find_element(*confirm).click()

    wait.until(lambda d: "/runs/manual__" in d.current_url)  # the UI opens the new run
    run_id = browser.current_url.rsplit("/runs/", 1)[1].split("?")[0]
    state = wait_for_run_state(browser, run_id, RUN_TIMEOUT_S)
    screenshot(browser, "4-run-finished")
    client = running_airflow.client
    assert state == "Success", client.task_states("daily_validation", run_id)

    run = next(r for r in client.runs("daily_validation") if r["run_type"] == "manual")
    assert (run["state"], run["triggered_by"], run["triggering_user_name"]) == (
        "success", "ui", "admin",
    )
    yesterday = (clicked_at - datetime.timedelta(days=1)).date().isoformat()
    assert run["data_interval_start"].startswith(yesterday)  # the day the run validated

    # the Tideline plugin's tab on the run: its checks, each linked to its Data Docs page
    tab = (By.XPATH, "//*[normalize-space(text())='Validation']")
    wait.until(expected_conditions.element_to_be_clickable(tab)).click()
    wait.until(lambda d: "tideline-run-validation" in d.current_url)
    wait.until(expected_conditions.frame_to_be_available_and_switch_to_it((By.TAG_NAME,
                                                                           "iframe")))
    wait.until(lambda d: f"Validation results of run {run_id}" in d.page_source)
    assert browser.page_source.count('href="data-docs/validations/') == 9  # 3 cases x 3 checks
    browser.switch_to.default_content()
    screenshot(browser, "5-run-validation-tab")

    # the plugin's pages as tables: the jobs with their state badges and links, the results
    # filtered, each linked to its run in Airflow
    browser.get(f"{url}/tideline/jobs")
    wait.until(lambda d: "badge state-" in d.page_source and "DAG runs" in d.page_source)
    screenshot(browser, "6-tideline-jobs")
    browser.get(f"{url}/tideline/validation?result=passed")
    wait.until(lambda d: "Airflow run" in d.page_source)
    assert "/dags/daily_validation/runs/manual__" in browser.page_source
    screenshot(browser, "7-validation-passed")

    # the results dashboard, served by the plugin under the same login: relative URLs, so its
    # API and assets resolve under /tideline/results/
    browser.get(f"{url}/tideline/results/")
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#experiments li[data-experiment]"))
    wait.until(lambda d: d.find_element(By.ID, "verdict-label").text in STATUSES.values())
    assert "cannot reach" not in browser.find_element(By.ID, "as-of").text
    screenshot(browser, "8-experiment-results")
