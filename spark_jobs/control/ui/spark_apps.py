"""The jobs page's Spark section: each job's application and UI, the cluster's master UI, and
the application's state as the standalone master reports it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spark_jobs.cluster.standalone import master_status
from spark_jobs.control.ui.html_tables import Link, table
from spark_jobs.settings import Settings
from spark_jobs.streaming.application import read_application

COLUMNS = ("job", "application", "Spark UI", "master", "state on the master")


def master_states(status: dict[str, Any] | None) -> dict[str, str]:
    """Application id -> its state (RUNNING, FINISHED, KILLED...) in the master's status."""
    apps = [*(status or {}).get("activeapps", []), *(status or {}).get("completedapps", [])]
    return {str(app["id"]): str(app["state"]) for app in apps}


def application_rows(jobs: Sequence[str], applications: dict[str, dict[str, Any] | None],
                     states: dict[str, str] | None) -> list[list[Any]]:
    """One row per job that ever started an application; `states` None: no standalone master."""
    rows = []
    for job in jobs:
        app = applications.get(job)
        if not app:
            continue
        ui = Link(app["ui"], app["ui"]) if app.get("ui") else "(UI off)"
        if states is None:
            state = "(not on a standalone master)"
        else:
            state = states.get(str(app["app_id"]), "unknown to the master")
        rows.append([job, app["app_id"], ui, app.get("master", ""), state])
    return rows


def spark_section(settings: Settings, jobs: Sequence[str]) -> str:
    """HTML: the cluster's master UI (when jobs run on one) and each job's application."""
    on_cluster = settings.spark.master.startswith("spark://")
    status = master_status(settings.cluster, timeout_s=1.0) if on_cluster else None
    body = "<h2>Spark</h2>"
    if on_cluster:
        link = f"<a href='{settings.cluster.master_ui}'>{settings.cluster.master_ui}</a>"
        answer = "answering" if status is not None else "<span class='bad'>not answering</span>"
        body += f"<p>Master {settings.spark.master}: UI {link} ({answer}).</p>"
    applications = {job: read_application(settings, job) for job in jobs}
    states = master_states(status) if on_cluster else None
    return body + table(COLUMNS, application_rows(jobs, applications, states),
                        "No job has started a Spark application yet.")
