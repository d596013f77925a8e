"""Section postgres and the command lines `tideline postgres` runs (no server: see
test_postgres_server.py): what is derived, what a wrong value says, what is masked."""

from __future__ import annotations

import shlex
import tempfile
from pathlib import Path

import pytest

from spark_jobs.config.show import show_lines
from spark_jobs.control.orchestration.environment import airflow_environment
from spark_jobs.local.postgres.binaries import (
    PostgresError,
    PostmasterPid,
    as_server_user,
    blocking_folder,
    candidate_folders,
    initdb_command,
    server_options,
    socket_file,
    start_command,
    stop_command,
)
from spark_jobs.settings import ConfigError, load_settings

PASSWORD = "p@ss:w/rd"


def test_defaults_derive_the_home_from_the_lake_and_format_urls() -> None:
    postgres = load_settings(environ={}, overrides={"lake": {"root": "/data/lake/"}}).postgres
    assert postgres.home == "/data/lake/_postgres"
    assert (postgres.host, postgres.port, postgres.user) == ("127.0.0.1", 5433, "tideline")
    assert postgres.url(postgres.airflow_db, "pw") == (
        "postgresql+psycopg2://tideline:pw@127.0.0.1:5433/airflow")
    # a password with URL syntax in it is quoted, an IPv6 host bracketed
    ipv6 = load_settings(environ={}, overrides={"postgres": {"host": "::1"}}).postgres
    assert ipv6.url("tideline", PASSWORD) == (
        "postgresql+psycopg2://tideline:p%40ss%3Aw%2Frd@[::1]:5433/tideline")


@pytest.mark.parametrize(("values", "message"), [
    ({"user": "Tide-Line"}, r"postgres\.user must be a lower-case name"),
    ({"airflow_db": "9lives"}, r"postgres\.airflow_db must be a lower-case name"),
    ({"airflow_db": "tideline"}, "must differ"),
    ({"port": 0}, r"postgres\.port must be a port number"),
])
def test_a_wrong_value_names_the_key(values, message) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(environ={}, overrides={"postgres": values})


def test_database_urls_are_checked_and_shown_without_their_password() -> None:
    with pytest.raises(ConfigError, match=r"airflow\.database must be a SQLAlchemy URL.*"
                                          r"'airflow\.db'"):
        load_settings(environ={"TIDELINE_AIRFLOW__DATABASE": "airflow.db"})
    settings = load_settings(environ={
        "TIDELINE_AIRFLOW__DATABASE": f"postgresql+psycopg2://tideline:{PASSWORD}@h:1/airflow",
        "TIDELINE_METADATA__URL": "postgresql://tideline:secret@h:1/tideline",
        "TIDELINE_POSTGRES__PASSWORD": "secret"})
    shown = "\n".join(show_lines(settings))
    assert "secret" not in shown and "w/rd" not in shown
    assert "airflow.database = postgresql+psycopg2://tideline:***@h:1/airflow" in shown
    assert "metadata.url = postgresql://tideline:***@h:1/tideline" in shown
    assert "postgres.password = ***" in shown


def test_airflow_database_replaces_the_sqlite_file(tmp_path: Path) -> None:
    url = "postgresql+psycopg2://tideline:pw@127.0.0.1:5433/airflow"
    settings = load_settings(environ={}, overrides={"airflow": {"home": str(tmp_path),
                                                                "database": url}})
    sqlite = airflow_environment(load_settings(environ={}), {"PATH": "/usr/bin"})
    inherited = {"AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS":
                 sqlite["AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS"]}  # a task's own env
    env = airflow_environment(settings, inherited)
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == url
    assert "AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS" not in env  # sqlite3's, not psycopg2's


def test_commands_run_as_the_postgres_user_only_under_root() -> None:
    assert as_server_user(["pg_ctl", "status"], euid=0) == [
        "runuser", "-u", "postgres", "--", "pg_ctl", "status"]
    assert as_server_user(["pg_ctl", "status"], euid=1000) == ["pg_ctl", "status"]


def test_server_commands_listen_on_the_host_with_the_socket_in_the_home() -> None:
    bindir, home = Path("/usr/lib/postgresql/15/bin"), Path("/srv/my lake/_postgres")
    initdb = initdb_command(bindir, home / "data")
    assert initdb[:3] == [str(bindir / "initdb"), "-D", str(home / "data")]
    assert {"-U", "postgres", "--auth-local=trust", "--auth-host=scram-sha-256"} <= set(initdb)
    options = server_options("127.0.0.1", 5433, home)
    # pg_ctl hands -o to a shell: the folder with a space stays one word
    assert shlex.split(options) == ["-c", "listen_addresses=127.0.0.1", "-p", "5433",
                                    "-k", "/srv/my lake/_postgres", "-N", "200"]
    start = start_command(bindir, home / "data", home / "postgres.log", options)
    assert start[:4] == [str(bindir / "pg_ctl"), "start", "-D", str(home / "data")]
    assert start[start.index("-o") + 1] == options and "-w" in start
    stop = stop_command(bindir, home / "data")
    assert stop[1] == "stop" and stop[stop.index("-m") + 1] == "fast"


def test_a_socket_path_too_long_for_unix_is_refused_with_the_fix() -> None:
    assert socket_file(Path("/tmp/pg"), 5433) == Path("/tmp/pg/.s.PGSQL.5433")
    with pytest.raises(PostgresError, match=r"longer than 107 bytes; set postgres\.home"):
        socket_file(Path("/tmp") / ("x" * 100), 5433)


def test_binaries_are_looked_for_in_pg_config_then_the_newest_version(tmp_path: Path) -> None:
    for version in ("9.6", "15", "16"):
        (tmp_path / version / "bin").mkdir(parents=True)
    found = candidate_folders("/opt/pg/bin", tmp_path, on_path="/usr/local/bin/pg_ctl")
    assert found[:4] == [Path("/opt/pg/bin"), tmp_path / "16/bin", tmp_path / "15/bin",
                         tmp_path / "9.6/bin"]
    assert candidate_folders(None, tmp_path / "none") == []


def test_a_folder_the_server_user_cannot_enter_is_named() -> None:
    with tempfile.TemporaryDirectory() as top:  # in /tmp: pytest's tmp_path is closed itself
        Path(top).chmod(0o755)
        _check_blocking_folders(Path(top))


def _check_blocking_folders(top: Path) -> None:
    closed = top / "closed"
    (closed / "inner").mkdir(parents=True)
    closed.chmod(0o700)
    home = closed / "inner" / "_postgres"
    owner = closed.stat().st_uid
    stranger = owner + 4242
    assert blocking_folder(home, stranger, gids=[]) == closed
    assert blocking_folder(home, owner, gids=[]) is None  # its owner may
    closed.chmod(0o710)
    assert blocking_folder(home, stranger, gids=[closed.stat().st_gid]) is None  # its group
    assert blocking_folder(Path("/tmp/not-there-yet/home"), stranger, gids=[]) is None


def test_the_servers_pid_file_is_read_and_a_damaged_one_ignored() -> None:
    text = "4242\n/h/data\n1764000000\n5433\n/h\n127.0.0.1\n  1234   5678\nready   \n"
    assert PostmasterPid.parse(text) == PostmasterPid(4242, 5433, "/h", "127.0.0.1", "ready")
    assert PostmasterPid.parse("4242\n/h/data\n") is None
    assert PostmasterPid.parse("x\n/h/data\n1\n5433\n/h\n127.0.0.1\n") is None
