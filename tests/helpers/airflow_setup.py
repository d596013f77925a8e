"""Helpers of the Airflow tests: an Airflow home over a copy of the history lake, and
running Airflow commands against it (the fixtures are in conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy

from helpers.history import HistoryLake, copy_history
from helpers.postgres import new_database
from spark_jobs.control.orchestration.airflow_api import AirflowClient
from spark_jobs.control.orchestration.environment import (
    REPO_ROOT,
    airflow_environment,
    airflow_executable,
    write_settings_file,
)
from spark_jobs.control.orchestration.standalone import AirflowStandalone
from spark_jobs.experiments.admin.metadata import add_ramps, read_ramps
from spark_jobs.local.broker import free_port
from spark_jobs.local.postgres.settings import PostgresSettings
from spark_jobs.settings import Settings, load_settings

ARTIFACTS = REPO_ROOT / "test-artifacts"
DESCRIBE_SCRIPT = Path(__file__).with_name("describe_dags.py")
MIGRATE_TIMEOUT_S = 240
STANDALONE_TIMEOUT_S = 180
DAG_PARSE_TIMEOUT_S = 90


@dataclass(frozen=True)
class AirflowSetup:
    """An Airflow home and the environment of every Airflow command run against it."""

    settings: Settings
    env: dict[str, str]
    lake: HistoryLake


@dataclass(frozen=True)
class RunningAirflow:
    setup: AirflowSetup
    standalone: AirflowStandalone
    client: AirflowClient
    password: str


def own_environment() -> dict[str, str]:
    """Our environment without Airflow or Tideline settings that would leak into the tests."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "TIDELINE_"))}


def make_setup(
    history: HistoryLake, root: Path, postgres: PostgresSettings | None = None
) -> AirflowSetup:
    """A lake copy, a home and a free API port under root; settings frozen into a file.
    With `postgres`, Airflow's database and the experiment metadata (the history's ramps
    copied) are new databases of that private PostgreSQL, as in production."""
    lake = copy_history(history, root / "history")
    overrides: dict[str, Any] = {
        "airflow": {"home": str(root / "airflow_home"), "port": free_port()}}
    if postgres is not None:
        metadata = new_database(postgres, "metadata")
        add_ramps(metadata, read_ramps(lake.settings.metadata.url, must_exist=True))
        overrides["metadata"] = {"url": metadata}
        overrides["airflow"]["database"] = new_database(postgres, "airflow")
    settings = load_settings(
        environ={"TIDELINE_CONFIG": str(lake.config_path)}, overrides=overrides
    )
    settings_file = write_settings_file(settings, root / "tideline.yaml")
    env = airflow_environment(
        settings, own_environment(), settings_file=settings_file, scheduled=False
    )
    return AirflowSetup(settings=settings, env=env, lake=lake)


def assert_on_postgres(setup: AirflowSetup) -> None:
    """Airflow's tables are in the PostgreSQL database the setup names, and no SQLite file
    was made beside them."""
    url = setup.env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
    assert url == setup.settings.airflow.database and url.startswith("postgresql")
    engine = sqlalchemy.create_engine(url)
    try:
        assert {"dag", "dag_run", "alembic_version"} <= set(sqlalchemy.inspect(engine)
                                                            .get_table_names())
    finally:
        engine.dispose()
    assert not (Path(setup.settings.airflow.home) / "airflow.db").exists()


def bare_setup(root: Path) -> tuple[Settings, dict[str, str]]:
    """Settings (empty lake under root, free API port) and the environment of an Airflow home
    under root, for tests that need no history; settings frozen into a file."""
    overrides = {"lake": {"root": str(root / "lake")},
                 "airflow": {"home": str(root / "airflow_home"), "port": free_port()}}
    settings = load_settings(environ={}, overrides=overrides)
    settings_file = write_settings_file(settings, root / "tideline.yaml")
    env = airflow_environment(
        settings, own_environment(), settings_file=settings_file, scheduled=False
    )
    return settings, env


def run_airflow(
    env: dict[str, str], *args: str, timeout_s: float
) -> subprocess.CompletedProcess[str]:
    """Run an `airflow` command; output captured for assertion messages."""
    return subprocess.run(
        [airflow_executable(), *args], env=env, cwd=REPO_ROOT, capture_output=True, text=True,
        timeout=timeout_s,
    )


def output_tail(result: subprocess.CompletedProcess[str], lines: int = 60) -> str:
    text = (result.stdout or "") + (result.stderr or "")
    return "\n".join(text.splitlines()[-lines:])


def describe_dags(env: dict[str, str], output: Path) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, str(DESCRIBE_SCRIPT), str(output)],
        env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, output_tail(result)
    return json.loads(output.read_text())
