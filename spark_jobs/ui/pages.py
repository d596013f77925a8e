"""The FastAPI app mounted by the Airflow plugin at /tideline.

Everything is read from the lake on each request (Delta tables through delta-rs, progress
files), so the pages show what the DAGs and jobs last wrote without a cache to go stale.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

import pyarrow as pa
from fastapi import FastAPI
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from spark_jobs.config import Settings, load_settings
from spark_jobs.contracts import TABLE_ALERTS, TABLE_VALIDATION_RESULTS
from spark_jobs.lake.delta import TableMissingError, read_arrow
from spark_jobs.ui.tables import page, table

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
    from spark_jobs.monitor.inputs import JOB_NAMES
    from spark_jobs.monitor.summary import render_summary
    from spark_jobs.monitor.watch import job_status

    statuses = [job_status(settings, job) for job in JOB_NAMES]
    problems = [
        f"<li><b>{escape(s['job'])}</b> {escape(p['kind'])}: {escape(p['message'])}</li>"
        for s in statuses
        for p in s["problems"]
    ]
    body = f"<pre>{escape(render_summary(statuses))}</pre>"
    body += f"<ul>{''.join(problems)}</ul>" if problems else "<p class='ok'>No problem.</p>"
    body += "<p>Logs: " + ", ".join(escape(s["log"]) for s in statuses) + "</p>"
    return page("Streaming jobs", body, refresh_s=15)


def alerts_page(settings: Settings) -> str:
    data = _latest(settings, TABLE_ALERTS, "created_at", LATEST_ALERTS)
    rows = [] if data is None else [
        [row.get(c) for c in ALERT_COLUMNS] for row in data.to_pylist()
    ]
    body = table(ALERT_COLUMNS, rows, "No alert so far.")
    return page(f"Alerts (latest {LATEST_ALERTS})", body, refresh_s=30)


def validation_page(settings: Settings) -> str:
    data = _latest(settings, TABLE_VALIDATION_RESULTS, "validated_at", 300)
    if data is None or data.num_rows == 0:
        return page("Validation results", "<p>No validation has run yet.</p>")
    columns = [c for c in data.column_names if c != "details"]
    rows = [[row.get(c) for c in columns] for row in data.to_pylist()]
    return page("Validation results", table(columns, rows, ""), refresh_s=60)


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
    def validation() -> str:
        return validation_page(settings)

    docs = Path(settings.validation.data_docs)
    docs.mkdir(parents=True, exist_ok=True)  # served before the first validation builds it
    app.mount("/data-docs", StaticFiles(directory=docs, html=True, check_dir=False))
    return app
