"""The closing report of a `daily_validation` run: what each case's checks found, with links.

It reads the `validation_results` rows the case tasks stored (they store them before they
fail), so it reports failed cases too, and a case with no rows (its task never ran) counts
as failed. Data Docs pages are linked through the Airflow UI, where `spark_jobs.control.ui` serves
the site, so a person needs no shell to open them.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlparse

from spark_jobs.settings import Settings

# Where the Tideline Airflow plugin (spark_jobs.control.ui) serves validation.data_docs.
DATA_DOCS_UI_PATH = "/tideline/data-docs"


def _local(location: str) -> Path:
    """A local folder given as a path or a file:// URI (what validation.data_docs allows)."""
    parsed = urlparse(location)
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else Path(location)


def data_docs_url(settings: Settings, page: str | None = None) -> str:
    """UI address of a Data Docs page given by its local path (None: the site's index)."""
    base = f"{settings.airflow.base_url.rstrip('/')}{DATA_DOCS_UI_PATH}"
    if page is None:
        return f"{base}/index.html"
    relative = os.path.relpath(_local(page), _local(settings.validation.data_docs))
    return f"{base}/{quote(Path(relative).as_posix())}"


def _check_row(settings: Settings, row: dict[str, Any]) -> dict[str, Any]:
    drift = row.get("max_drift")
    return {
        "check": row["check"],
        "success": bool(row["success"]),
        "evaluated": int(row["evaluated"]),
        "unexpected": int(row["unexpected"]),
        "max_drift": None if drift is None or drift != drift else float(drift),  # NaN: none
        "data_docs": data_docs_url(settings, row["data_docs"]) if row.get("data_docs") else None,
    }


def run_results(settings: Settings, day: datetime.date, run_id: str) -> dict[str, list[dict]]:
    """Case -> its stored check rows for this run and day (cases without rows are absent)."""
    from spark_jobs.control.validation_results import read_results

    results = read_results(settings)
    mine = results[(results["run_id"] == run_id) & (results["logical_date"] == day)]
    cases: dict[str, list[dict[str, Any]]] = {}
    for row in mine.sort_values(["case", "check"]).to_dict("records"):
        cases.setdefault(row["case"], []).append(_check_row(settings, row))
    return cases


def _line(cells: list[str], widths: list[int]) -> str:
    return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()


def validation_report(
    settings: Settings, day: datetime.date, run_id: str, cases_run: Sequence[str]
) -> tuple[str, dict[str, Any]]:
    """(text for the task log, JSON-able summary) of one run's validation of `day` in the
    cases the DAG ran (`cases_run`: a case without rows counts as failed)."""
    found = run_results(settings, day, run_id)
    cases = {
        case: {"success": bool(found.get(case)) and all(c["success"] for c in found[case]),
               "checks": found.get(case, [])}
        for case in cases_run
    }
    summary = {
        "day": day.isoformat(),
        "run_id": run_id,
        "success": all(c["success"] for c in cases.values()),
        "data_docs": data_docs_url(settings),
        "cases": cases,
    }
    rows = [["CASE", "CHECK", "RESULT", "EVALUATED", "UNEXPECTED", "MAX DRIFT", "DATA DOCS"]]
    for case, outcome in cases.items():
        if not outcome["checks"]:
            rows.append([case, "-", "MISSING", "-", "-", "-", "(the case's task stored nothing)"])
        for check in outcome["checks"]:
            drift = check["max_drift"]
            rows.append([
                case, check["check"], "pass" if check["success"] else "FAIL",
                str(check["evaluated"]), str(check["unexpected"]),
                "-" if drift is None else f"{drift:.2%}", check["data_docs"] or "-",
            ])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    verdict = "passed" if summary["success"] else "FAILED"
    text = "\n".join([
        f"validation of {day.isoformat()} (run {run_id}) {verdict}",
        *(_line(row, widths) for row in rows),
        f"Data Docs: {summary['data_docs']}",
    ])
    return text, summary
