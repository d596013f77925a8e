"""The Dockerfile read against the layout it packages (no Docker engine here): what it copies
exists, its settings load, it publishes the ports the servers use and binds them where a
published port reaches, and it runs a command the CLI has."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from spark_jobs.cli import build_parser
from spark_jobs.settings import load_settings

ROOT = Path(__file__).resolve().parents[1]


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines()]
    return [(line.split()[0].upper(), line.partition(" ")[2].strip())
            for line in lines if line and not line.startswith("#")]


def arguments(name: str) -> list[str]:
    return [args for kind, args in instructions() if kind == name]


def test_what_it_copies_exists_and_nothing_of_a_checkouts_state():
    copied = [part for args in arguments("COPY") for part in shlex.split(args)[:-1]]
    assert copied and all((ROOT / part).exists() for part in copied), copied
    assert "infra" not in copied  # infra/airflow_home: a checkout's Airflow DB and password
    kept = (ROOT / ".dockerignore").read_text().splitlines()
    assert {f"!{part}" for part in copied} <= set(kept)


def test_its_settings_load_and_servers_listen_where_published_ports_reach():
    environ = dict(pair.split("=", 1) for args in arguments("ENV") for pair in args.split())
    settings = load_settings(environ=environ)
    assert (settings.kafka.broker_bind, settings.airflow.host, settings.dashboard.host) == (
        "0.0.0.0",) * 3
    assert settings.airflow.base_url == f"http://127.0.0.1:{settings.airflow.port}"
    homes = (settings.lake.root, settings.airflow.home)
    volume = arguments("VOLUME")[0].strip('[]"')
    assert all(home.startswith(volume + "/") for home in homes), homes
    assert environ["SPARK_LOCAL_IP"] == "0.0.0.0"  # where Spark's web UIs listen
    broker_port = int(settings.kafka.bootstrap.rpartition(":")[2])
    exposed = set()
    for port in (port for args in arguments("EXPOSE") for port in args.split()):
        first, _, last = port.partition("-")
        exposed |= set(range(int(first), int(last or first) + 1))
    assert exposed == {settings.airflow.port, settings.dashboard.port, broker_port,
                       settings.cluster.master_ui_port, *range(4040, 4050)}


def test_it_runs_a_tideline_command():
    entry = arguments("ENTRYPOINT")[0]
    command = arguments("CMD")[0]
    assert entry == '["tini", "--", "tideline"]'
    args = build_parser().parse_args(json.loads(command))
    assert args.command == "platform"


def test_it_installs_the_worker_path_file_as_the_set_up_does():
    """Without it, every Python process Spark starts in the image compiles pyspark from the
    zip Spark puts first on its path (spark_jobs/streaming/worker_path.py)."""
    install = "from spark_jobs.streaming.worker_path import install; install()"
    assert any(install in args for args in arguments("RUN"))
    assert install in (ROOT / "infra" / "setup.sh").read_text()
