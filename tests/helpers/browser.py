"""Headless Chromium through selenium, built like the Airflow UI test's (tests/dags), for
the browser tests outside it; screenshots go to test-artifacts/ (gitignored)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMEDRIVER = "/usr/bin/chromedriver"
CHROME_ARGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--window-size=1400,1000",
)
PAGE_LOAD_TIMEOUT_S = 30
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@contextmanager
def chromium(window_size: str | None = None) -> Iterator:
    """A headless Chromium driver, always quit at the end (no browser is left running)."""
    if not (shutil.which("chromium") and shutil.which(CHROMEDRIVER)):
        pytest.fail("chromium and chromedriver are missing: run infra/setup.sh")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for argument in CHROME_ARGS:
        if window_size and argument.startswith("--window-size="):
            argument = f"--window-size={window_size}"
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        driver.set_page_load_timeout(PAGE_LOAD_TIMEOUT_S)
        yield driver
    finally:
        driver.quit()


def screenshot(driver, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    driver.save_screenshot(str(path))
    return path
