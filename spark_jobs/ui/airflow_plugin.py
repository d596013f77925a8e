"""Airflow plugin (entry point `airflow.plugins`): Tideline's pages in the Airflow 3 UI.

Mounts the /tideline FastAPI app on the Airflow API server and adds navigation entries
plus a "Validation" tab on every DAG run listing that run's checks, each linked to its GX
Data Docs page.
The pages are read-only and the API server binds to 127.0.0.1 on the embedded platform.
"""

from __future__ import annotations

from typing import Any, ClassVar

from airflow.plugins_manager import AirflowPlugin

from spark_jobs.ui.pages import build_app

URL_PREFIX = "/tideline"


def _view(name: str, href: str, url_route: str, destination: str = "nav") -> dict[str, Any]:
    """An external view; the UI routes plugin tabs and pages by `url_route`."""
    view = {"name": name, "href": href, "url_route": url_route, "destination": destination}
    return view | ({"category": "browse"} if destination == "nav" else {})


class TidelinePlugin(AirflowPlugin):
    name = "tideline"
    fastapi_apps: ClassVar[list[dict[str, Any]]] = [
        {"app": build_app(), "url_prefix": URL_PREFIX, "name": "Tideline"}
    ]
    external_views: ClassVar[list[dict[str, Any]]] = [
        _view("Tideline jobs", "tideline/jobs", "tideline-jobs"),
        _view("Tideline alerts", "tideline/alerts", "tideline-alerts"),
        _view("Validation results", "tideline/validation", "tideline-validation"),
        _view("Data Docs", "tideline/data-docs/index.html", "tideline-data-docs"),
        # a tab on every DAG run; the UI fills in {RUN_ID}: that run's checks and Data Docs
        _view("Validation", "tideline/validation?run_id={RUN_ID}", "tideline-run-validation",
              destination="dag_run"),
    ]
