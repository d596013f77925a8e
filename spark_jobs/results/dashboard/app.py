"""The dashboard's FastAPI app: one static page, its JSON API and Plotly served from the
installed package (no CDN: the page works offline). One ResultsCache per app."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from spark_jobs.results.dashboard.api import experiment_json, experiments_json
from spark_jobs.results.dashboard.results import Results, ResultsCache
from spark_jobs.settings import Settings

STATIC = Path(__file__).parent / "static"
NO_CACHE = {"Cache-Control": "no-cache"}


def plotly_js() -> Path:
    path = Path(str(resources.files("plotly") / "package_data" / "plotly.min.js"))
    if not path.is_file():
        raise RuntimeError(f"plotly.min.js is missing from the plotly package ({path})")
    return path


def create_app(settings: Settings) -> FastAPI:
    app = FastAPI(title="Tideline experiment results", docs_url=None, redoc_url=None,
                  openapi_url=None)
    cache = ResultsCache(settings)
    plotly_path = plotly_js()

    def results() -> Results:
        try:
            return cache.get()
        except Exception as exc:  # the page shows the message and keeps polling
            raise HTTPException(503, f"cannot read the experiment results: {exc}") from exc

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html", headers=NO_CACHE)

    @app.get("/healthz")
    def healthz() -> dict[str, bool]:
        return {"ok": True}

    @app.get("/api/experiments")
    def experiments() -> dict[str, Any]:
        return experiments_json(results(), settings)

    @app.get("/api/experiments/{experiment_hash}")
    def experiment(experiment_hash: str) -> dict[str, Any]:
        current = results()
        found = current.find(experiment_hash)
        if found is None:
            raise HTTPException(404, f"no experiment {experiment_hash!r} in experiment_metrics")
        return experiment_json(current, found, settings)

    @app.get("/static/plotly.min.js", include_in_schema=False)
    def plotly() -> FileResponse:  # matched before the mount below
        return FileResponse(plotly_path, media_type="text/javascript",
                            headers={"Cache-Control": "public, max-age=86400"})

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app
