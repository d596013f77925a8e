"""The PostgreSQL programs and the command lines Tideline runs them with.

Debian keeps initdb and pg_ctl off PATH, in the versioned bin folder of its postgresql lib
tree; `pg_config --bindir` names it when the server package is installed. PostgreSQL refuses
to run as root, so under root every program runs as the `postgres` system user that package
creates (`runuser`), in a home that user owns and can reach.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

SERVER_PROGRAMS = ("initdb", "pg_ctl", "postgres")
SERVER_USER = "postgres"  # the system user Debian's postgresql package creates
SUPERUSER = "postgres"  # the bootstrap role initdb creates (reached over the Unix socket only)
LIB_TREE = Path("/usr/lib/postgresql")
MAX_SOCKET_PATH = 107  # sun_path holds 108 bytes with the final NUL
MAX_CONNECTIONS = 200  # Airflow standalone's components each keep a pool
START_TIMEOUT_S = 60
NOT_INSTALLED = ("PostgreSQL's server programs (initdb, pg_ctl, postgres) were not found: "
                 "install Debian's postgresql package (`apt-get install postgresql`, which "
                 "`make setup` does)")


class PostgresError(RuntimeError):
    """The private PostgreSQL cannot be used; the message says what to fix."""


def _has_server(folder: Path) -> bool:
    return all((folder / name).is_file() for name in SERVER_PROGRAMS)


def _version(folder: Path) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", folder.parent.name))


def candidate_folders(pg_config_bindir: str | None, lib_tree: Path = LIB_TREE,
                      on_path: str | None = None) -> list[Path]:
    """Where to look, best first: pg_config's answer, the newest version under the lib
    tree, then the folder of a pg_ctl on PATH."""
    folders = [Path(pg_config_bindir)] if pg_config_bindir else []
    folders += sorted(lib_tree.glob("*/bin"), key=_version, reverse=True)
    if on_path:
        folders.append(Path(on_path).resolve().parent)
    return folders


def find_bindir() -> Path:
    """The folder holding initdb, pg_ctl and postgres; PostgresError when none does."""
    bindir = None
    pg_config = shutil.which("pg_config")
    if pg_config:
        result = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True)
        bindir = result.stdout.strip() if result.returncode == 0 else None
    for folder in candidate_folders(bindir, on_path=shutil.which("pg_ctl")):
        if _has_server(folder):
            return folder
    raise PostgresError(NOT_INSTALLED)


def as_server_user(command: Sequence[str], euid: int) -> list[str]:
    """The command as run: unchanged, or as the `postgres` system user when we are root."""
    return ["runuser", "-u", SERVER_USER, "--", *command] if euid == 0 else list(command)


def initdb_command(bindir: Path, data: Path) -> list[str]:
    """A new cluster: the bootstrap superuser trusted on the Unix socket only (its folder is
    the home, which only the server user can enter), passwords over TCP."""
    return [str(bindir / "initdb"), "-D", str(data), "-U", SUPERUSER, "--auth-local=trust",
            "--auth-host=scram-sha-256", "--encoding=UTF8", "--locale=C", "--no-instructions"]


def server_options(host: str, port: int, socket_dir: Path) -> str:
    """The postgres options pg_ctl passes through its shell (hence quoted)."""
    return " ".join([
        "-c", shlex.quote(f"listen_addresses={host}"), "-p", str(port),
        "-k", shlex.quote(str(socket_dir)), "-N", str(MAX_CONNECTIONS)])


def start_command(bindir: Path, data: Path, log: Path, options: str) -> list[str]:
    return [str(bindir / "pg_ctl"), "start", "-D", str(data), "-l", str(log), "-o", options,
            "-w", "-t", str(START_TIMEOUT_S)]


def stop_command(bindir: Path, data: Path) -> list[str]:
    return [str(bindir / "pg_ctl"), "stop", "-D", str(data), "-m", "fast", "-w",
            "-t", str(START_TIMEOUT_S)]


def socket_file(socket_dir: Path, port: int) -> Path:
    """The server's Unix socket; PostgresError when its path is too long for one."""
    path = socket_dir / f".s.PGSQL.{port}"
    if len(str(path).encode()) > MAX_SOCKET_PATH:
        raise PostgresError(
            f"the Unix socket path {path} is longer than {MAX_SOCKET_PATH} bytes; set "
            "postgres.home to a shorter folder")
    return path


def blocking_folder(path: Path, uid: int, gids: Iterable[int]) -> Path | None:
    """The first existing folder above `path` that user uid (groups gids) cannot enter, or
    None when every one can be entered (`path` itself is handed to that user)."""
    groups = set(gids)
    for folder in reversed(path.parents):
        try:
            info = folder.stat()
        except FileNotFoundError:
            return None  # the rest is created by us, for that user
        if uid == 0:
            continue
        if info.st_uid == uid:
            allowed = info.st_mode & stat.S_IXUSR
        elif info.st_gid in groups:
            allowed = info.st_mode & stat.S_IXGRP
        else:
            allowed = info.st_mode & stat.S_IXOTH
        if not allowed:
            return folder
    return None


@dataclass(frozen=True)
class PostmasterPid:
    """What the running server wrote to <data>/postmaster.pid (its own pid file)."""

    pid: int
    port: int
    socket_dir: str
    listen: str
    status: str

    @classmethod
    def parse(cls, text: str) -> PostmasterPid | None:
        """None for a file that is damaged or still being written."""
        lines = text.splitlines()
        if len(lines) < 6 or not lines[0].strip().isdigit() or not lines[3].strip().isdigit():
            return None
        status = lines[7].strip() if len(lines) > 7 else ""
        return cls(int(lines[0]), int(lines[3]), lines[4].strip(), lines[5].strip(), status)


def server_environment() -> dict[str, str]:
    """Our environment without PG* variables, which would redirect pg_ctl or libpq."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PG")}
