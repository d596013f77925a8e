"""Fixtures of the Airflow tests: Airflow homes in tmp that serve the repo's DAGs over copies
of the three-day history lake.

Two homes, so that no test sees another's runs: one for CLI commands (`airflow dags test`,
its DB migrated once), one for Airflow standalone (started once per session by the
project's own orchestration code, shared by the backfill and browser tests, and always
stopped with its whole process group). The scheduler makes no runs of its own there
(`scheduled=False`): only what a test triggers runs.

Both run the control plane as production does: Airflow's database and the experiment
metadata are databases of the session's private PostgreSQL (`private_postgres`). SQLite, the
embedded default, stays what `tideline platform` uses (tests/local/test_platform.py).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
from helpers.airflow_setup import (
    ARTIFACTS,
    DAG_PARSE_TIMEOUT_S,
    MIGRATE_TIMEOUT_S,
    STANDALONE_TIMEOUT_S,
    AirflowSetup,
    RunningAirflow,
    assert_on_postgres,
    describe_dags,
    make_setup,
    output_tail,
    run_airflow,
)
from helpers.history import HistoryLake

from spark_jobs.control.orchestration.airflow_api import AirflowClient
from spark_jobs.control.orchestration.environment import ADMIN_USER, REPO_ROOT
from spark_jobs.control.orchestration.standalone import AirflowStandalone
from spark_jobs.local.platform_stack import DAG_IDS
from spark_jobs.local.postgres.settings import PostgresSettings


@pytest.fixture(scope="session")
def cli_airflow(history_lake: HistoryLake, tmp_path_factory: pytest.TempPathFactory,
                private_postgres: PostgresSettings):
    """A migrated Airflow home for `airflow dags test`, its database on PostgreSQL."""
    setup = make_setup(history_lake, tmp_path_factory.mktemp("airflow_cli"), private_postgres)
    result = run_airflow(setup.env, "db", "migrate", timeout_s=MIGRATE_TIMEOUT_S)
    assert result.returncode == 0, output_tail(result)
    assert_on_postgres(setup)
    return setup


@pytest.fixture(scope="session")
def dag_structure(cli_airflow: AirflowSetup, tmp_path_factory: pytest.TempPathFactory):
    """What Airflow's DagBag parses from the repo's dags/ folder (see describe_dags.py)."""
    return describe_dags(cli_airflow.env, tmp_path_factory.mktemp("dagbag") / "dags.json")


@pytest.fixture(scope="session")
def running_airflow(
    history_lake: HistoryLake, tmp_path_factory: pytest.TempPathFactory,
    private_postgres: PostgresSettings,
) -> Iterator[RunningAirflow]:
    """Airflow standalone on a free port, logged in as admin, every DAG parsed; its database
    on PostgreSQL."""
    root = tmp_path_factory.mktemp("airflow_standalone")
    setup = make_setup(history_lake, root, private_postgres)
    standalone = AirflowStandalone(setup.env, root / "standalone.log", cwd=REPO_ROOT)
    try:
        standalone.start(timeout_s=STANDALONE_TIMEOUT_S)
        password = standalone.admin_password()
        with AirflowClient(standalone.local_url, ADMIN_USER, password) as client:
            client.wait_for_dags(list(DAG_IDS), DAG_PARSE_TIMEOUT_S)
            assert_on_postgres(setup)
            yield RunningAirflow(setup, standalone, client, password)
    finally:
        standalone.stop()
        ARTIFACTS.mkdir(exist_ok=True)
        if standalone.log_path.exists():
            shutil.copy(standalone.log_path, ARTIFACTS / "airflow-standalone.log")
