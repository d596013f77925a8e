"""Start, stop and read the private PostgreSQL cluster (`tideline postgres`).

The home (postgres.home) holds everything: `data/` (the cluster, with PostgreSQL's own pid
file postmaster.pid, the truth about whether it runs), `postgres.log`, the Unix socket and
`password` (the role's generated password). pg_ctl starts and stops the server (`-m fast`
rolls back open transactions and leaves no process behind). Under root the home is handed to
the `postgres` system user, which every program then runs as.
"""

from __future__ import annotations

import os
import pwd
import secrets
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from spark_jobs.local.postgres.binaries import (
    SERVER_USER,
    PostgresError,
    PostmasterPid,
    as_server_user,
    blocking_folder,
    find_bindir,
    initdb_command,
    server_environment,
    server_options,
    socket_file,
    start_command,
    stop_command,
)
from spark_jobs.local.postgres.roles import (
    ensure_database,
    ensure_role_and_databases,
    superuser_connection,
)
from spark_jobs.local.postgres.settings import PostgresSettings

COMMAND_TIMEOUT_S = 120
EXIT_WAIT_S = 30


@dataclass(frozen=True)
class Layout:
    """The files of one home."""

    home: Path

    @property
    def data(self) -> Path:
        return self.home / "data"

    @property
    def log(self) -> Path:
        return self.home / "postgres.log"

    @property
    def password_file(self) -> Path:
        return self.home / "password"

    @property
    def pid_file(self) -> Path:
        return self.data / "postmaster.pid"


def layout(settings: PostgresSettings) -> Layout:
    return Layout(Path(settings.home).expanduser().resolve())


@dataclass
class PostgresStatus:
    """What `tideline postgres status` reports."""

    home: Path
    server: PostmasterPid | None = None
    urls: dict[str, str] = field(default_factory=dict)  # what -> SQLAlchemy URL

    @property
    def up(self) -> bool:
        return self.server is not None

    def lines(self) -> list[str]:
        if self.server is None:
            return [f"postgres: not running (home {self.home})"]
        return [f"postgres: running, pid {self.server.pid}, on {self.server.listen}:"
                f"{self.server.port} (home {self.home})",
                *(f"{what}: {url}" for what, url in self.urls.items())]


def _server_ids() -> tuple[int, int, list[int]]:
    """uid, gid and groups of the `postgres` system user (programs run as it under root)."""
    try:
        entry = pwd.getpwnam(SERVER_USER)
    except KeyError:
        raise PostgresError(
            f"PostgreSQL refuses to run as root and there is no `{SERVER_USER}` system user to "
            "run it as: install Debian's postgresql package, or run as another user") from None
    groups = os.getgrouplist(SERVER_USER, entry.pw_gid)
    return entry.pw_uid, entry.pw_gid, groups


def prepare_home(paths: Layout, euid: int) -> None:
    """Create the home (0700); under root, hand it to the server user, who must be able to
    enter every folder above it."""
    if euid == 0:
        uid, gid, groups = _server_ids()
        blocked = blocking_folder(paths.home, uid, groups)
        if blocked is not None:
            raise PostgresError(
                f"the `{SERVER_USER}` system user (PostgreSQL refuses to run as root) cannot "
                f"enter {blocked} (mode {blocked.stat().st_mode & 0o777:o}) on the way to "
                f"postgres.home {paths.home}: set postgres.home to a folder it can reach, "
                "e.g. /var/tmp/tideline-postgres")
    paths.home.mkdir(parents=True, exist_ok=True)
    paths.home.chmod(0o700)
    if euid == 0 and paths.home.stat().st_uid != uid:
        for folder, _, files in os.walk(paths.home):
            os.chown(folder, uid, gid)
            for name in files:
                os.chown(os.path.join(folder, name), uid, gid)


def _run(command: list[str], paths: Layout, what: str) -> None:
    result = subprocess.run(
        as_server_user(command, os.geteuid()), cwd=paths.home, env=server_environment(),
        capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip()
        if paths.log.exists():
            detail += "\n" + "\n".join(paths.log.read_text(errors="replace").splitlines()[-10:])
        raise PostgresError(
            f"{what} failed (exit {result.returncode}; log {paths.log}): {detail}")


def running_server(paths: Layout) -> PostmasterPid | None:
    """The server's own pid file, when the process it names is alive."""
    try:
        server = PostmasterPid.parse(paths.pid_file.read_text())
    except (FileNotFoundError, PermissionError):
        return None
    if server is None:
        return None
    try:
        os.kill(server.pid, 0)
    except ProcessLookupError:
        return None  # left by a crash; pg_ctl start replaces it
    except PermissionError:
        pass  # alive, another user's
    return server


def role_password(settings: PostgresSettings, paths: Layout) -> str:
    """postgres.password, else the one generated at the first start (kept in the home)."""
    if settings.password:
        return settings.password
    if not paths.password_file.exists():
        paths.password_file.write_text(secrets.token_urlsafe(18) + "\n")
        paths.password_file.chmod(0o600)
        if os.geteuid() == 0:
            uid, gid, _ = _server_ids()
            os.chown(paths.password_file, uid, gid)
    return paths.password_file.read_text().strip()


def start_postgres(settings: PostgresSettings) -> PostgresStatus:
    """Initialise the cluster once, start it unless it runs, then make sure the role and the
    two databases exist (all idempotent)."""
    paths = layout(settings)
    socket_file(paths.home, settings.port)
    bindir = find_bindir()
    prepare_home(paths, os.geteuid())
    if not (paths.data / "PG_VERSION").exists():
        _run(initdb_command(bindir, paths.data), paths, "initdb")
    server = running_server(paths)
    if server is None:
        options = server_options(settings.host, settings.port, paths.home)
        _run(start_command(bindir, paths.data, paths.log, options), paths, "pg_ctl start")
        server = running_server(paths)
    if server is None or server.port != settings.port:
        where = f"port {server.port}" if server else "no pid file"
        raise PostgresError(f"the server in {paths.data} runs with {where}, not postgres.port "
                            f"{settings.port}: stop it first (`tideline postgres stop`)")
    password = role_password(settings, paths)
    ensure_role_and_databases(settings, paths.home, password)
    return postgres_status(settings)


def stop_postgres(settings: PostgresSettings) -> bool:
    """Stop the server (fast: open transactions roll back); False when none was running."""
    paths = layout(settings)
    server = running_server(paths)
    if server is None:
        return False
    postmaster = _process(server.pid)  # taken before: its pid could be reused after
    _run(stop_command(find_bindir(), paths.data), paths, "pg_ctl stop")
    if postmaster is not None:
        _wait_until_gone(postmaster)
    return True


def _process(pid: int) -> psutil.Process | None:
    try:
        return psutil.Process(pid)
    except psutil.Error:  # gone already, or not ours to watch
        return None


def _wait_until_gone(postmaster: psutil.Process) -> None:
    """pg_ctl returns once the pid file is gone, which the postmaster removes just before it
    exits: wait for the exit itself, so `stop` leaves no process behind when it returns."""
    deadline = time.monotonic() + EXIT_WAIT_S
    while time.monotonic() < deadline:
        try:
            if not postmaster.is_running() or postmaster.status() == psutil.STATUS_ZOMBIE:
                return  # exited (a zombie until its parent, init, reaps it)
        except psutil.NoSuchProcess:
            return
        except psutil.AccessDenied:  # another user's: as good as pg_ctl's word
            return
        time.sleep(0.05)
    raise PostgresError(
        f"the PostgreSQL server (pid {postmaster.pid}) still runs {EXIT_WAIT_S} s after "
        "pg_ctl stop returned; stop it by hand (kill -TERM)")


def postgres_status(settings: PostgresSettings) -> PostgresStatus:
    paths = layout(settings)
    server = running_server(paths)
    status = PostgresStatus(paths.home, server)
    if server is not None and (settings.password or paths.password_file.exists()):
        password = role_password(settings, paths)
        status.urls = {"metadata.url": settings.url(settings.metadata_db, password),
                       "airflow.database": settings.url(settings.airflow_db, password)}
    return status


def create_database(settings: PostgresSettings, name: str) -> str:
    """One more database owned by the role, on the running server (tests give each Airflow
    home its own); returns its URL."""
    paths = layout(settings)
    with superuser_connection(settings, paths.home) as connection:
        ensure_database(connection, name, settings.user)
    return settings.url(name, role_password(settings, paths))
