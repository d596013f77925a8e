"""Browse -> Tideline jobs: one row per streaming job with its state in Airflow's colours,
its numbers, links (job log, Spark UI, checkpoint, the watch task's runs in Airflow) and
actions; plus the job log and checkpoint pages those links open."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

from spark_jobs.control.monitor.summary import age_text
from spark_jobs.control.ui.html_tables import Action, Badge, Link, page, table
from spark_jobs.control.ui.spark_apps import spark_section
from spark_jobs.settings import Settings

COLUMNS = ("job", "state", "pid", "input rows/s", "processed rows/s", "lag", "watermark",
           "last report", "restarts (window)", "problems", "links", "actions")
LOG_LINES = 300
WATCH_DAG = "streaming_jobs"
REFRESH_S = 15


def state_badge(status: Mapping[str, Any]) -> Badge:
    """running green (orange when unhealthy), down red, stopped grey, external violet."""
    state = str(status["state"])
    if state == "down":
        return Badge(state, "failed")
    if state in ("stopped", "external"):
        return Badge(state, state)
    return Badge(state, "success" if status.get("healthy", True) else "warning")


def _number(value: Any, pattern: str = "{:,.0f}") -> str:
    return "-" if value is None else pattern.format(value)


def job_links(settings: Settings, job: str, app: Mapping[str, Any] | None) -> list[Link]:
    """Log, Spark UI (when the job's application has one), checkpoint, the DAG runs."""
    runs = (f"{settings.airflow.base_url.rstrip('/')}/dags/{WATCH_DAG}/tasks/"
            f"{quote('watch_' + job)}")
    links = [Link(f"jobs/{quote(job)}/log", "log")]
    if app and app.get("ui"):
        links.append(Link(str(app["ui"]), "Spark UI", top=True))
    links += [Link(f"jobs/{quote(job)}/checkpoint", "checkpoint"),
              Link(runs, "DAG runs", top=True)]
    return links


def job_actions(status: Mapping[str, Any]) -> list[Action]:
    job = str(status["job"])
    running = status["state"] in ("running", "started", "restarted")
    actions = [Action(f"jobs/{quote(job)}/watch", "Watch now",
                      f"Run one supervision pass over {job} now (starts it if stopped)?")]
    if running:
        actions += [
            Action(f"jobs/{quote(job)}/restart", "Restart",
                   f"Stop {job} gracefully and start it again from its checkpoint?"),
            Action(f"jobs/{quote(job)}/stop", "Stop",
                   f"Stop {job}? The {WATCH_DAG} DAG starts it again within a minute "
                   "unless it is paused."),
        ]
    return actions


def job_rows(settings: Settings, statuses: Sequence[Mapping[str, Any]],
             applications: Mapping[str, Mapping[str, Any] | None]) -> list[list[Any]]:
    return [
        [s["job"], state_badge(s), s.get("pid"), _number(s.get("input_rows_per_s")),
         _number(s.get("processed_rows_per_s")), _number(s.get("lag"), "{:,}"),
         s.get("watermark") or "-", age_text(s.get("last_report_age_ms")),
         s.get("restarts_in_window", 0),
         "; ".join(f"{p['kind']}: {p['message']}" for p in s.get("problems", [])) or "-",
         job_links(settings, str(s["job"]), applications.get(str(s["job"]))),
         job_actions(s)]
        for s in statuses
    ]


def jobs_page(settings: Settings) -> str:
    """The monitor's view of every streaming job (the page itself starts nothing: only an
    action button, confirmed, does)."""
    from spark_jobs.control.monitor.watch import all_job_statuses
    from spark_jobs.streaming.application import read_application

    statuses = all_job_statuses(settings)
    applications = {s["job"]: read_application(settings, s["job"]) for s in statuses}
    body = table(COLUMNS, job_rows(settings, statuses, applications), "No streaming job.")
    body += "<h2>Records not passed on, by reason (since the lake was created)</h2>"
    body += table(["job", "reason", "records"],
                  [[s["job"], reason, f"{n:,}"] for s in statuses
                   for reason, n in sorted(s.get("drops", {}).items())],
                  "No record dropped or dead-lettered yet.")
    body += spark_section(settings, [s["job"] for s in statuses])
    return page("Streaming jobs", body, refresh_s=REFRESH_S)


def log_tail(settings: Settings, job: str, lines: int = LOG_LINES) -> str:
    """The last `lines` lines of the job's log (the file the monitor starts it with)."""
    from spark_jobs.control.monitor.supervisor import log_path

    path = log_path(settings, job)
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no log yet at {path})"
    return f"{path} (last {lines} lines)\n\n" + "\n".join(text.splitlines()[-lines:])


def _newest_batch(folder: Path) -> str:
    batches = [int(p.name) for p in folder.glob("*") if p.name.isdigit()] if folder.is_dir() \
        else []
    return str(max(batches)) if batches else "-"


def checkpoint_page(settings: Settings, job: str) -> str:
    """Where the job's checkpoint is and how far it got: newest offsets and commits batch."""
    root = settings.lake.checkpoint(job)
    if "://" in root:
        return page(f"Checkpoint of {job}", f"<p>{escape(root)} (an object store)</p>")
    folder = Path(root)
    if not folder.is_dir():
        return page(f"Checkpoint of {job}", f"<p>No checkpoint yet at {escape(root)}.</p>")
    rows = [[name, _newest_batch(folder / name)] for name in ("offsets", "commits")]
    state = folder / "state"
    rows.append(["state", "present" if state.is_dir() else "none"])
    body = f"<p>{escape(str(folder.resolve()))}</p>"
    body += table(["folder", "newest batch"], rows, "")
    return page(f"Checkpoint of {job}", body, refresh_s=REFRESH_S)
