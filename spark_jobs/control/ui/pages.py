"""The FastAPI app mounted by the Airflow plugin at /tideline.

Everything is read from the lake on each request (Delta tables through delta-rs, progress
files), so the pages show what the DAGs and jobs last wrote without a cache to go stale.
"""

from __future__ import annotations

import datetime
from html import escape
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from fastapi import FastAPI, HTTPException
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from spark_jobs.contracts.tables import TABLE_ALERTS, TABLE_VALIDATION_RESULTS
from spark_jobs.control.ui.html_tables import Badge, Link, filters, page, table
from spark_jobs.control.ui.job_actions import ACTIONS
from spark_jobs.control.ui.jobs_view import checkpoint_page, jobs_page, log_tail
from spark_jobs.settings import Settings, load_settings
from spark_jobs.streaming.lake.delta import TableMissingError, read_arrow

ALERT_COLUMNS = ("created_at", "source", "kind", "summary", "experiment_hash",
                 "experiment_group", "metric", "observed", "threshold", "channels", "run")
ALERT_FILTERS = (("source", "DAG or job"), ("kind", "kind"), ("experiment", "experiment"))
VALIDATION_FILTERS = (("run_id", "run"), ("day", "day (YYYY-MM-DD)"), ("case", "case"),
                      ("check", "check"), ("result", "result"))
RESULTS = ("", "passed", "failed")
LATEST_ALERTS = 200
LATEST_RESULTS = 300


def _read(settings: Settings, name: str) -> pa.Table | None:
    try:
        return read_arrow(settings.lake.table(name))
    except TableMissingError:
        return None


def _newest(data: pa.Table, order_by: str, limit: int) -> pa.Table:
    return data.sort_by([(order_by, "descending")]).slice(0, limit)


def _where(data: pa.Table, conditions: list[pc.Expression]) -> pa.Table:
    for condition in conditions:
        data = data.filter(condition)
    return data


def run_link(url: str | None) -> Link | None:
    """The Airflow run that raised or stored the row, opened in the whole window."""
    return Link(url, "Airflow run", top=True) if url else None


def alerts_page(settings: Settings, source: str | None = None, kind: str | None = None,
                experiment: str | None = None) -> str:
    """The newest alerts, filtered by source (DAG or job), kind and experiment."""
    data = _read(settings, TABLE_ALERTS)
    conditions = [pc.field(column) == value for column, value in
                  (("source", source), ("kind", kind), ("experiment_hash", experiment)) if value]
    rows = [] if data is None else [
        [*(row.get(c) for c in ALERT_COLUMNS[:-1]), run_link(row.get("run_url"))]
        for row in _newest(_where(data, conditions), "created_at", LATEST_ALERTS).to_pylist()
    ]
    body = filters(ALERT_FILTERS, {"source": source, "kind": kind, "experiment": experiment})
    body += table(ALERT_COLUMNS, rows, "No alert matches the filters." if conditions
                  else "No alert so far.")
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


def _result_cell(settings: Settings, column: str, value: Any) -> Any:
    """A check's outcome as Airflow's success/failed badge, its Data Docs page as a link."""
    if column == "success":
        return Badge("passed", "success") if value else Badge("failed", "failed")
    return docs_link(settings, value) if column == "data_docs" else value


def _validation_conditions(run_id: str | None, day: str | None, case: str | None,
                           check: str | None, result: str | None) -> list[pc.Expression]:
    conditions = [pc.field(column) == value for column, value in
                  (("run_id", run_id), ("case", case), ("check", check)) if value]
    if day:
        conditions.append(pc.field("logical_date") == pa.scalar(
            datetime.date.fromisoformat(day), pa.date32()))
    if result in ("passed", "failed"):
        conditions.append(pc.field("success") == (result == "passed"))
    return conditions


def validation_page(settings: Settings, run_id: str | None = None, day: str | None = None,
                    case: str | None = None, check: str | None = None,
                    result: str | None = None) -> str:
    """The newest results, filtered (the Validation tab of a DAG run gives its run_id)."""
    title = "Validation results" + (f" of run {run_id}" if run_id else "")
    values = {"run_id": run_id, "day": day, "case": case, "check": check, "result": result}
    body = filters(VALIDATION_FILTERS, values, {"result": RESULTS})
    try:
        conditions = _validation_conditions(run_id, day, case, check, result)
    except ValueError:
        return page(title, body + f"<p class='bad'>Not a day: {escape(day or '')} "
                    "(YYYY-MM-DD).</p>")
    data = _read(settings, TABLE_VALIDATION_RESULTS)
    if data is not None:
        data = _newest(_where(data, conditions), "validated_at", LATEST_RESULTS)
    if data is None or data.num_rows == 0:
        empty = ("No validation result for this run." if run_id else
                 "No validation result matches the filters." if conditions else
                 "No validation has run yet.")
        return page(title, body + f"<p>{escape(empty)}</p>", refresh_s=60)
    columns = [c for c in data.column_names if c not in ("details", "run_url")] + ["run"]
    rows = [[_result_cell(settings, c, row.get(c)) for c in columns[:-1]]
            + [run_link(row.get("run_url"))] for row in data.to_pylist()]
    return page(title, body + table(columns, rows, ""), refresh_s=60)


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

    @app.get("/jobs/{job}/log", response_class=PlainTextResponse)
    def job_log(job: str) -> str:
        return log_tail(settings, deployed(job))

    @app.get("/jobs/{job}/checkpoint", response_class=HTMLResponse)
    def job_checkpoint(job: str) -> str:
        return checkpoint_page(settings, deployed(job))

    @app.post("/jobs/{job}/{action}")
    def job_action(job: str, action: str) -> dict[str, str]:
        """One of the jobs page's buttons (the plugin lets only an Airflow user allowed to
        run the streaming_jobs DAG through, see `airflow_plugin`)."""
        if action not in ACTIONS:
            raise HTTPException(404, f"no action {action!r}")
        return {"message": ACTIONS[action](settings, deployed(job))}

    @app.get("/alerts", response_class=HTMLResponse)
    def alerts(source: str | None = None, kind: str | None = None,
               experiment: str | None = None) -> str:
        return alerts_page(settings, source or None, kind or None, experiment or None)

    @app.get("/validation", response_class=HTMLResponse)
    def validation(run_id: str | None = None, day: str | None = None, case: str | None = None,
                   check: str | None = None, result: str | None = None) -> str:
        return validation_page(settings, run_id or None, day or None, case or None,
                               check or None, result or None)

    def deployed(job: str) -> str:
        """The job, when it is one of the deployed streaming jobs (else 404)."""
        if job not in settings.monitor.jobs:
            raise HTTPException(404, f"{job!r} is not a deployed streaming job")
        return job

    docs = Path(settings.validation.data_docs)
    docs.mkdir(parents=True, exist_ok=True)  # served before the first validation builds it
    app.mount("/data-docs", StaticFiles(directory=docs, html=True, check_dir=False))
    return app
