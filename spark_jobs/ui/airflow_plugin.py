"""Airflow plugin (entry point `airflow.plugins`): Tideline's pages in the Airflow 3 UI.

Mounts the /tideline FastAPI app on the Airflow API server and adds navigation entries
plus a "Data Docs" tab on every DAG run, so a validation run links to its GX report.
The pages are read-only and the API server binds to 127.0.0.1 on the embedded platform.
"""

from __future__ import annotations

from typing import Any, ClassVar

from airflow.plugins_manager import AirflowPlugin

from spark_jobs.ui.pages import build_app

URL_PREFIX = "/tideline"


class TidelinePlugin(AirflowPlugin):
    name = "tideline"
    fastapi_apps: ClassVar[list[dict[str, Any]]] = [
        {"app": build_app(), "url_prefix": URL_PREFIX, "name": "Tideline"}
    ]
    external_views: ClassVar[list[dict[str, Any]]] = [
        {"name": "Tideline jobs", "href": "tideline/jobs", "destination": "nav",
         "category": "browse"},
        {"name": "Tideline alerts", "href": "tideline/alerts", "destination": "nav",
         "category": "browse"},
        {"name": "Validation results", "href": "tideline/validation", "destination": "nav",
         "category": "browse"},
        {"name": "Data Docs", "href": "tideline/data-docs/index.html", "destination": "dag_run"},
    ]
