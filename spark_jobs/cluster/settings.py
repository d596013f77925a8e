"""Settings of the Spark standalone cluster `tideline cluster` runs: section cluster.

Declared once (`spark_jobs.config.fields.setting`); `spark_jobs.settings` assembles it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spark_jobs.config.fields import ConfigError, setting
from spark_jobs.config.kinds import Port, PositiveInt, Text

MEMORY_UNITS = ("k", "m", "g", "t")


@dataclass(frozen=True)
class ClusterSettings:
    host: str = setting("127.0.0.1", Text(form="a host name or address"),
                        "address the master, workers and history server bind to")
    workers: int = setting(2, PositiveInt(), "workers `tideline cluster start` runs",
                           unit="workers")
    worker_cores: int = setting(1, PositiveInt(), "cores each worker offers", unit="cores")
    worker_memory: str = setting("2g", Text(form="a JVM memory size such as 2g or 512m"),
                                 "memory each worker offers its executors")
    master_port: int = setting(7077, Port(), "port of the master (spark://host:port)")
    master_ui_port: int = setting(8088, Port(), "port of the master's web UI and JSON status")
    worker_ui_port: int = setting(
        8091, Port(), "web UI port of the first worker (the next ones count up)")
    history_port: int = setting(18080, Port(), "port of the Spark history server")
    home: str = setting(None, Text(optional=True),
                        "pid files, logs and work folders (default: <lake.root>/_cluster)")

    @classmethod
    def finish(cls, values: dict[str, Any], done: Mapping[str, Any]) -> dict[str, Any]:
        memory = values["worker_memory"].lower()
        if not (memory[:-1].isdigit() and memory[-1] in MEMORY_UNITS):
            raise ConfigError(
                f"cluster.worker_memory must be a number with a unit k, m, g or t (e.g. 2g), "
                f"got {values['worker_memory']!r}")
        values["worker_memory"] = memory
        values["home"] = values["home"] or f"{done['lake'].root.rstrip('/')}/_cluster"
        return values

    @property
    def master_url(self) -> str:
        return f"spark://{self.host}:{self.master_port}"

    @property
    def master_ui(self) -> str:
        return f"http://{self.host}:{self.master_ui_port}"

    @property
    def history_ui(self) -> str:
        return f"http://{self.host}:{self.history_port}"
