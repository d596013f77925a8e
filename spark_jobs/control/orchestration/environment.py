"""The environment Airflow runs in, derived from Tideline's settings.

Every Airflow process (standalone, `airflow dags test`, `airflow backfill create`, the task
processes) must agree on AIRFLOW_HOME, the DAG folder and the database, and must see the same
Tideline settings as the process that started it; building that environment in one place
keeps them in agreement.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from spark_jobs.config.network import connect_host
from spark_jobs.control.submit import freeze_settings
from spark_jobs.settings import ENV_PREFIX, Settings

REPO_ROOT = Path(__file__).resolve().parents[3]
DAGS_FOLDER = REPO_ROOT / "dags"
# The embedded SQLite file is written by the scheduler, the DAG processor, the triggerer, the
# API server and any `airflow` command at once; sqlite3's default 5 s wait for its lock made a
# `backfill create` fail with "database is locked" now and then. Airflow imports this dict.
SQLITE_CONNECT_ARGS: dict[str, object] = {"timeout": 60}
# Each DAG file is named after the one DAG it defines (tests/dags checks it), so a new DAG is
# a new file: the platform unpauses and the tests expect what the folder holds.
DAG_IDS = tuple(sorted(path.stem for path in DAGS_FOLDER.glob("*.py")))
PASSWORDS_FILE = "simple_auth_manager_passwords.json.generated"
SETTINGS_FILE = "tideline.yaml"
ADMIN_USER = "admin"
PARALLELISM = 4
# Airflow's defaults (30 s import, 50 s parse, 50 s stale threshold) are tight for a DAG file
# whose import alone takes 2-3 s on an idle 2-core machine.
DAG_REPARSE_SECONDS = 30  # each file parsed again this often (Airflow's default)
DAG_IMPORT_TIMEOUT_SECONDS = 120
DAG_PARSE_TIMEOUT_SECONDS = 180
STALE_DAG_THRESHOLD_SECONDS = 600
EXECUTION_API_TIMEOUT_SECONDS = 30


def airflow_executable() -> str:
    """The `airflow` script next to this interpreter (standalone spawns `airflow` by name)."""
    beside = Path(sys.executable).parent / "airflow"
    return str(beside) if beside.exists() else "airflow"


def passwords_file(home: str | Path) -> Path:
    """Where the simple auth manager writes the generated admin password."""
    return Path(home) / PASSWORDS_FILE


def write_settings_file(settings: Settings, path: str | Path) -> Path:
    """Freeze the effective settings for Airflow's task processes (`freeze_settings`)."""
    return freeze_settings(settings, path)


def _execution_api_url(settings: Settings) -> str:
    """Task processes talk to the local API server, whatever public base_url users see."""
    path = urlsplit(settings.airflow.base_url).path.rstrip("/")
    return f"http://{connect_host(settings.airflow.host)}:{settings.airflow.port}{path}/execution/"


def airflow_environment(
    settings: Settings,
    base: Mapping[str, str] | None = None,
    *,
    settings_file: str | Path | None = None,
    scheduled: bool = True,
    paused_at_creation: bool = False,
) -> dict[str, str]:
    """Environment variables for any Airflow command that serves Tideline's DAGs.

    TIDELINE_* variables of `base` pass through, unless `settings_file` (see
    `write_settings_file`) already holds every setting. `scheduled=False` turns off the
    scheduler's own runs (cron and catchup), so only manual runs and backfills execute:
    tests use it to get exactly the runs they ask for.
    """
    env = dict(os.environ if base is None else base)
    if settings_file is not None:
        env = {k: v for k, v in env.items() if not (k.startswith(ENV_PREFIX) and "__" in k)}
        env["TIDELINE_CONFIG"] = str(Path(settings_file).resolve())
    home = Path(settings.airflow.home).resolve()
    bin_dir = str(Path(sys.executable).parent)
    if bin_dir not in env.get("PATH", "").split(os.pathsep):
        env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")])
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": str(PARALLELISM),
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": str(paused_at_creation),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN_USER}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": _execution_api_url(settings),
            "AIRFLOW__API__HOST": settings.airflow.host,
            "AIRFLOW__API__PORT": str(settings.airflow.port),
            "AIRFLOW__API__BASE_URL": settings.airflow.base_url,
            "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": str(scheduled),
            # One parser and a short rescan: new DAG files show up within seconds, cheaply.
            "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "30",
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": str(DAG_REPARSE_SECONDS),
            # A parse slowed past its timeout by a busy machine (two cores shared with Spark)
            # records the file as parsed without its DAG, and after stale_dag_threshold the
            # DAG drops out of the UI and the API. Tideline's files never generate DAGs
            # dynamically, so generous limits cost nothing: a removed DAG lingers 10 minutes.
            "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": str(DAG_IMPORT_TIMEOUT_SECONDS),
            "AIRFLOW__DAG_PROCESSOR__DAG_FILE_PROCESSOR_TIMEOUT": str(DAG_PARSE_TIMEOUT_SECONDS),
            "AIRFLOW__DAG_PROCESSOR__STALE_DAG_THRESHOLD": str(STALE_DAG_THRESHOLD_SECONDS),
            # A task's calls to the API server gave up after 5 s while Spark jobs started
            # beside it, failing the task before it ran.
            "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": str(EXECUTION_API_TIMEOUT_SECONDS),
            "NO_COLOR": "1",
        }
    )
    # A configured database (airflow.database, e.g. the private PostgreSQL, or the variable
    # itself) wins over the embedded SQLite file.
    sqlite_args = f"{__name__}.SQLITE_CONNECT_ARGS"
    if settings.airflow.database:
        env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = settings.airflow.database
        if env.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS") == sqlite_args:
            del env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS"]  # inherited, SQLite's own
    if "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN" not in env:
        env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{home / 'airflow.db'}"
        env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS"] = sqlite_args
    return env
