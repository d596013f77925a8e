"""The private PostgreSQL of the tests: started once per session by the project's own code
(`spark_jobs.local.postgres`), each user of it in databases of its own."""

from __future__ import annotations

import itertools
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from spark_jobs.control.orchestration.environment import REPO_ROOT
from spark_jobs.local.broker import free_port
from spark_jobs.local.postgres.server import (
    create_database,
    layout,
    start_postgres,
    stop_postgres,
)
from spark_jobs.local.postgres.settings import PostgresSettings
from spark_jobs.settings import load_settings

_names = itertools.count()
ARTIFACTS = REPO_ROOT / "test-artifacts"


@contextmanager
def running_postgres() -> Iterator[PostgresSettings]:
    """A started cluster on a free port, stopped and deleted at the end. Its home is a new
    folder of /tmp: under root the `postgres` system user runs the server and must reach it,
    and pytest's own temporary folders are closed to other users (mode 700)."""
    home = Path(tempfile.mkdtemp(prefix="tideline-pg-"))
    settings = load_settings(environ={}, overrides={
        "lake": {"root": str(home / "lake")},
        "postgres": {"home": str(home), "port": free_port()},
    }).postgres
    try:
        start_postgres(settings)
        yield settings
    finally:
        try:
            stop_postgres(settings)
        finally:
            log = layout(settings).log
            if log.exists():  # the server's side of a failure, kept beside Airflow's logs
                ARTIFACTS.mkdir(exist_ok=True)
                shutil.copy(log, ARTIFACTS / "postgres.log")
            shutil.rmtree(home, ignore_errors=True)


def new_database(settings: PostgresSettings, purpose: str) -> str:
    """The URL of a new database of the role (a name unique in the session)."""
    return create_database(settings, f"{purpose}_{next(_names)}")
