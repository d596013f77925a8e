"""Airflow plugin (entry point `airflow.plugins`): Tideline's pages in the Airflow 3 UI.

Mounts the /tideline FastAPI app on the Airflow API server, with the experiment results
dashboard under /tideline/results (the app `tideline dashboard` serves on 127.0.0.1 only),
and adds navigation entries plus a "Validation" tab on every DAG run listing that run's
checks, each linked to its GX Data Docs page.
Every request under /tideline (static Data Docs and the dashboard included) needs Airflow's
login, checked
by `require_airflow_login`: a mounted app gets no authentication from Airflow otherwise. The
only requests that change anything, the jobs page's actions (POST), also need the right to
run the streaming_jobs DAG (the DAG that supervises the jobs) and the page's own header, which
a form of another site cannot send with the login cookie.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from airflow.plugins_manager import AirflowPlugin
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, RedirectResponse
from starlette.responses import Response

from spark_jobs.control.ui.pages import build_app
from spark_jobs.results.dashboard.app import create_app
from spark_jobs.settings import load_settings

URL_PREFIX = "/tideline"
RESULTS_PATH = "/results"  # the dashboard, under URL_PREFIX


async def _airflow_user(request: Request) -> Any:
    """The logged-in user, resolved exactly as Airflow's own API routes do (`get_user`):
    an `Authorization: Bearer` token first, then the user Airflow's JWT middleware built
    from the `_token` cookie, then the cookie itself. Raises HTTPException 401/403.

    Imported here, not at module level: every Airflow process loads plugins, and only the
    API server needs the security module.
    """
    from airflow.api_fastapi.core_api.security import bearer_scheme, get_user

    credentials = await bearer_scheme(request)
    return await get_user(request, None, credentials)


def _wants_html(request: Request) -> bool:
    """A browser opening a page (not a script or the UI's fetch calls)."""
    return request.method in ("GET", "HEAD") and "text/html" in request.headers.get("accept", "")


def _not_logged_in(request: Request, error: HTTPException) -> Response:
    """Browsers go to the login page (and come back after it); other clients get the error."""
    if _wants_html(request):
        from airflow.api_fastapi.app import get_auth_manager

        return RedirectResponse(get_auth_manager().get_url_login(next_url=str(request.url)),
                                status_code=303)
    return JSONResponse({"detail": error.detail}, error.status_code)


ACTION_HEADER = "X-Tideline-Action"
OPERATED_DAG = "streaming_jobs"


def _may_act(request: Request, user: Any) -> bool:
    """A job action: sent by the page (its header) for a user who may run the DAG that
    supervises the jobs (Airflow's own permission on DAG runs)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import (
        DagAccessEntity,
        DagDetails,
    )

    if request.headers.get(ACTION_HEADER) != "1":
        return False
    return get_auth_manager().is_authorized_dag(
        method="POST", access_entity=DagAccessEntity.RUN, details=DagDetails(id=OPERATED_DAG),
        user=user)


def require_airflow_login(app: FastAPI) -> FastAPI:
    """Refuse every request to `app` without a valid Airflow login allowed to see plugins."""

    @app.middleware("http")
    async def check_login(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        from airflow.api_fastapi.app import get_auth_manager
        from airflow.api_fastapi.auth.managers.models.resource_details import AccessView

        try:
            user = await _airflow_user(request)
        except HTTPException as error:
            return _not_logged_in(request, error)
        if not get_auth_manager().is_authorized_view(access_view=AccessView.PLUGINS, user=user):
            return JSONResponse({"detail": "Forbidden"}, 403)
        if request.method not in ("GET", "HEAD") and not _may_act(request, user):
            return JSONResponse({"detail": "Forbidden: not allowed to operate the jobs"}, 403)
        return await call_next(request)

    return app


def _view(name: str, href: str, url_route: str, destination: str = "nav") -> dict[str, Any]:
    """An external view; the UI routes plugin tabs and pages by `url_route`."""
    view = {"name": name, "href": href, "url_route": url_route, "destination": destination}
    return view | ({"category": "browse"} if destination == "nav" else {})


def tideline_app() -> FastAPI:
    """The pages and, mounted inside (so the same login check covers it), the dashboard:
    a second plugin app under /tideline/results would never be reached, /tideline
    matching first."""
    settings = load_settings()
    app = build_app(settings)
    app.mount(RESULTS_PATH, create_app(settings))
    return require_airflow_login(app)


class TidelinePlugin(AirflowPlugin):
    name = "tideline"
    fastapi_apps: ClassVar[list[dict[str, Any]]] = [
        {"app": tideline_app(), "url_prefix": URL_PREFIX, "name": "Tideline"}
    ]
    external_views: ClassVar[list[dict[str, Any]]] = [
        _view("Tideline jobs", "tideline/jobs", "tideline-jobs"),
        _view("Tideline alerts", "tideline/alerts", "tideline-alerts"),
        _view("Validation results", "tideline/validation", "tideline-validation"),
        _view("Data Docs", "tideline/data-docs/index.html", "tideline-data-docs"),
        _view("Experiment results", "tideline/results/", "tideline-results"),
        # a tab on every DAG run; the UI fills in {RUN_ID}: that run's checks and Data Docs
        _view("Validation", "tideline/validation?run_id={RUN_ID}", "tideline-run-validation",
              destination="dag_run"),
    ]
