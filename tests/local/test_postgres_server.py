"""A real private PostgreSQL, started and stopped by `spark_jobs.local.postgres`: the role
logs in with its password over TCP on 127.0.0.1 only, start is idempotent, stop leaves no
process and keeps the data, and the CLI prints the URLs to use."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest
import sqlalchemy as sa
from helpers.postgres import new_database, running_postgres

from spark_jobs.cli import main
from spark_jobs.local.postgres.server import (
    layout,
    postgres_status,
    role_password,
    start_postgres,
    stop_postgres,
)

pytestmark = pytest.mark.integration


def _scalar(url: str, query: str) -> object:
    """The query's one value (a statement without rows: None), committed."""
    engine = sa.create_engine(url)
    try:
        with engine.begin() as connection:
            result = connection.execute(sa.text(query))
            return result.scalar() if result.returns_rows else None
    finally:
        engine.dispose()


def _processes_of(home: Path) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        try:
            if any(str(home) in part for part in process.info["cmdline"] or ()):
                found.append(process)
        except psutil.Error:
            continue
    return found


def test_the_role_owns_both_databases_and_needs_its_password(private_postgres) -> None:
    status = postgres_status(private_postgres)
    assert status.up and status.server is not None
    assert (status.server.listen, status.server.port) == ("127.0.0.1", private_postgres.port)
    assert status.server.socket_dir == str(layout(private_postgres).home)
    metadata, airflow = status.urls["metadata.url"], status.urls["airflow.database"]
    password = role_password(private_postgres, layout(private_postgres))
    assert metadata.startswith(f"postgresql+psycopg2://tideline:{password}@127.0.0.1:")
    assert _scalar(metadata, "SELECT current_user") == "tideline"
    assert _scalar(airflow, "SELECT pg_get_userbyid(datdba) FROM pg_database "
                            "WHERE datname = current_database()") == "tideline"
    assert _scalar(metadata, "SHOW listen_addresses") == "127.0.0.1"
    with pytest.raises(sa.exc.OperationalError, match="password authentication failed"):
        _scalar(private_postgres.url("tideline", "not-the-password"), "SELECT 1")


def test_start_is_idempotent_and_a_new_database_is_the_roles(private_postgres) -> None:
    before = postgres_status(private_postgres)
    again = start_postgres(private_postgres)  # running already: role and databases kept
    assert again.server == before.server and again.urls == before.urls
    url = new_database(private_postgres, "extra")
    assert _scalar(url, "SELECT current_database()").startswith("extra_")


def test_stop_leaves_nothing_running_and_keeps_the_data(capsys, monkeypatch) -> None:
    with running_postgres() as postgres:
        home = layout(postgres).home
        monkeypatch.setenv("TIDELINE_POSTGRES__HOME", str(home))
        monkeypatch.setenv("TIDELINE_POSTGRES__PORT", str(postgres.port))
        assert main(["postgres", "status"]) == 0
        url = capsys.readouterr().out.split("metadata.url: ")[1].split()[0]
        _scalar(url, "CREATE TABLE kept AS SELECT 42 AS answer")
        server = postgres_status(postgres).server
        assert server is not None and psutil.pid_exists(server.pid)

        assert main(["postgres", "stop"]) == 0
        assert capsys.readouterr().out.strip() == "stopped"
        assert not psutil.pid_exists(server.pid) or psutil.Process(server.pid).status() == \
            psutil.STATUS_ZOMBIE  # until init reaps the server pg_ctl started
        assert [p.info["cmdline"] for p in _processes_of(home)
                if p.status() != psutil.STATUS_ZOMBIE] == []
        assert main(["postgres", "status"]) == 1
        assert "not running" in capsys.readouterr().out
        assert not stop_postgres(postgres)

        assert main(["postgres", "start"]) == 0
        printed = capsys.readouterr().out
        assert f"TIDELINE_METADATA__URL='{url}'" in printed
        assert _scalar(url, "SELECT answer FROM kept") == 42
