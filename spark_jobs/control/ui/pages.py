"""The FastAPI app mounted by the Airflow plugin at /tideline.

Everything is read from the lake on each request (Delta tables through delta-rs, progress
files), so the pages show what the DAGs and jobs last wrote without a cache to go stale.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from fastapi import FastAPI
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from spark_jobs.contracts.tables import TABLE_ALERTS, TABLE_VALIDATION_RESULTS
from spark_jobs.control.ui.html_tables import Link, page, table
from spark_jobs.control.ui.spark_apps import spark_section
from spark_jobs.settings import Settings, load_settings
from spark_jobs.streaming.lake.delta import TableMissingError, read_arrow

ALERT_COLUMNS = ("created_at", "source", "kind", "summary", "experiment_hash",
                 "experiment_group", "metric", "observed", "threshold", "run_url", "channels")
LATEST_ALERTS = 200


def _latest(settings: Settings, name: str, order_by: str, limit: int) -> pa.Table | None:
    try:
        data = read_arrow(settings.lake.table(name))
    except TableMissingError:
        return None
    if order_by in data.column_names:
        data = data.sort_by([(order_by, "descending")])
    return data.slice(0, limit)


def jobs_page(settings: Settings) -> str:
    """The monitor's view of every streaming job (read-only: starts and alerts nothing)."""
    from spark_jobs.control.monitor.summary import render_summary
    from spark_jobs.control.monitor.watch import all_job_statuses

    statuses = all_job_statuses(settings)
    problems = [
        f"<li><b>{escape(s['job'])}</b> {escape(p['kind'])}: {escape(p['message'])}</li>"
        for s in statuses
        for p in s["problems"]
    ]
    body = f"<pre>{escape(render_summary(statuses))}</pre>"
    body += "<h2>Records not passed on, by reason (since the lake was created)</h2>"
    body += table(["job", "reason", "records"],
                  [[s["job"], reason, f"{n:,}"] for s in statuses
                   for reason, n in sorted(s.get("drops", {}).items())],
                  "No record dropped or dead-lettered yet.")
    body += f"<ul>{''.join(problems)}</ul>" if problems else "<p class='ok'>No problem.</p>"
    body += "<p>Logs: " + ", ".join(escape(s["log"]) for s in statuses) + "</p>"
    body += spark_section(settings, [s["job"] for s in statuses])
    return page("Streaming jobs", body, refresh_s=15)


def alerts_page(settings: Settings) -> str:
    data = _latest(settings, TABLE_ALERTS, "created_at", LATEST_ALERTS)
    rows = [] if data is None else [
        [row.get(c) for c in ALERT_COLUMNS] for row in data.to_pylist()
    ]
    body = table(ALERT_COLUMNS, rows, "No alert so far.")
    return page(f"Alerts (latest {LATEST_ALERTS})", body, refresh_s=30)


def docs_link(settings: Settings, page_path: str | None) -> Link | str | None:
    """A Data Docs page as a link served under this app (relative: works behind a proxy)."""
    if not page_path:
        return None
    try:
        relative = Path(page_path).resolve().relative_to(
            Path(settings.validation.data_docs).resolve()
        )
    except ValueError:
        return page_path
    return Link(f"data-docs/{relative.as_posix()}", "Data Docs")


def validation_page(settings: Settings, run_id: str | None = None) -> str:
    """The newest results, or one run's (the Validation tab of a DAG run links here)."""
    data = _latest(settings, TABLE_VALIDATION_RESULTS, "validated_at", 300)
    title = "Validation results" + (f" of run {run_id}" if run_id else "")
    if data is not None and run_id:
        data = data.filter(pc.field("run_id") == run_id)
    if data is None or data.num_rows == 0:
        return page(title, "<p>No validation result for this run.</p>" if run_id
                    else "<p>No validation has run yet.</p>")
    columns = [c for c in data.column_names if c != "details"]
    rows = [
        [docs_link(settings, row.get(c)) if c == "data_docs" else row.get(c) for c in columns]
        for row in data.to_pylist()
    ]
    return page(title, table(columns, rows, ""), refresh_s=60)


def build_app(settings: Settings | None = None) -> FastAPI:
    """The /tideline app; settings come from TIDELINE_* like every other entry point."""
    settings = settings or load_settings()
    app = FastAPI(title="Tideline", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/", include_in_schema=False)
    def index() -> RedirectResponse:
        return RedirectResponse("jobs")

    @app.get("/jobs", response_class=HTMLResponse)
    def jobs() -> str:
        return jobs_page(settings)

    @app.get("/alerts", response_class=HTMLResponse)
    def alerts() -> str:
        return alerts_page(settings)

    @app.get("/validation", response_class=HTMLResponse)
    def validation(run_id: str | None = None) -> str:
        return validation_page(settings, run_id)

    docs = Path(settings.validation.data_docs)
    docs.mkdir(parents=True, exist_ok=True)  # served before the first validation builds it
    app.mount("/data-docs", StaticFiles(directory=docs, html=True, check_dir=False))
    return app
