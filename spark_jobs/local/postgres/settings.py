"""Settings of the private PostgreSQL cluster `tideline postgres` runs: section postgres.

Declared once (`spark_jobs.config.fields.setting`); `spark_jobs.settings` assembles it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from spark_jobs.config.fields import ConfigError, setting
from spark_jobs.config.kinds import Port, Secret, Text

DRIVER = "postgresql+psycopg2"  # SQLAlchemy dialect+driver of every URL printed
_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")  # an identifier PostgreSQL needs no quotes for


@dataclass(frozen=True)
class PostgresSettings:
    host: str = setting("127.0.0.1", Text(form="a host name or address"),
                        "address the server listens on (TCP; loopback by default)")
    port: int = setting(5433, Port(), "port of the server (5432 is left to a system cluster)")
    home: str = setting(None, Text(optional=True),
                        "data folder, log, socket and password file "
                        "(default: <lake.root>/_postgres)")
    user: str = setting("tideline", Text(form="a role name"),
                        "role that owns the databases (login with a password)")
    password: str = setting(None, Secret(),
                            "that role's password (default: generated once, kept in the home)")
    metadata_db: str = setting("tideline", Text(form="a database name"),
                               "database of the experiment metadata (metadata.url)")
    airflow_db: str = setting("airflow", Text(form="a database name"),
                              "database of Airflow's metadata (airflow.database)")

    @classmethod
    def finish(cls, values: dict[str, Any], done: Mapping[str, Any]) -> dict[str, Any]:
        for key in ("user", "metadata_db", "airflow_db"):
            if not _NAME.match(values[key]):
                raise ConfigError(
                    f"postgres.{key} must be a lower-case name of letters, digits and _ "
                    f"(at most 63, not starting with a digit), got {values[key]!r}")
        if values["metadata_db"] == values["airflow_db"]:
            raise ConfigError("postgres.metadata_db and postgres.airflow_db must differ: "
                              "Airflow's migrations own their database")
        values["home"] = values["home"] or f"{done['lake'].root.rstrip('/')}/_postgres"
        return values

    def url(self, database: str, password: str) -> str:
        """The SQLAlchemy URL of one database for the owning role."""
        host = f"[{self.host}]" if ":" in self.host else self.host  # an IPv6 address
        return (f"{DRIVER}://{quote(self.user, safe='')}:{quote(password, safe='')}"
                f"@{host}:{self.port}/{database}")
