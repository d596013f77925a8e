"""The role and the databases of the private cluster, made idempotently.

Run as the bootstrap superuser over the Unix socket in the home (trusted there, and only
there: TCP logins need the role's password). Each database is owned by the role, so Airflow's
migrations and the metadata tables may create what they need in its public schema.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from spark_jobs.local.postgres.binaries import SUPERUSER, PostgresError
from spark_jobs.local.postgres.settings import PostgresSettings


@contextmanager
def superuser_connection(settings: PostgresSettings, socket_dir: Path) -> Iterator[Any]:
    """An autocommit connection (CREATE DATABASE runs outside a transaction)."""
    import psycopg2

    try:
        connection = psycopg2.connect(host=str(socket_dir), port=settings.port, user=SUPERUSER,
                                      dbname="postgres")
    except psycopg2.OperationalError as exc:
        raise PostgresError(f"cannot reach the server on its socket in {socket_dir}: "
                            f"{str(exc).strip().splitlines()[0]}") from None
    connection.autocommit = True
    try:
        yield connection
    finally:
        connection.close()


def ensure_role(connection: Any, user: str, password: str) -> None:
    """The login role with this password (created, or its password set again)."""
    from psycopg2 import sql

    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (user,))
        verb = "ALTER" if cursor.fetchone() else "CREATE"
        cursor.execute(sql.SQL(verb + " ROLE {} LOGIN PASSWORD {}").format(
            sql.Identifier(user), sql.Literal(password)))


def ensure_database(connection: Any, name: str, owner: str) -> bool:
    """The database owned by `owner`; True when it was created now."""
    from psycopg2 import sql

    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
        if cursor.fetchone():
            return False
        cursor.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(
            sql.Identifier(name), sql.Identifier(owner)))
    return True


def ensure_role_and_databases(settings: PostgresSettings, socket_dir: Path,
                              password: str) -> None:
    with superuser_connection(settings, socket_dir) as connection:
        ensure_role(connection, settings.user, password)
        for name in (settings.metadata_db, settings.airflow_db):
            ensure_database(connection, name, settings.user)

