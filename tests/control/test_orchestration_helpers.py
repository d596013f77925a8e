"""The pure parts of the orchestration code, without Airflow: what a run covers, the
environment Airflow gets, the platform's start date, and stopping a whole session."""

from __future__ import annotations

import datetime
import importlib
import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from spark_jobs.control.orchestration.environment import airflow_environment, write_settings_file
from spark_jobs.control.orchestration.runs import (
    as_of_ms,
    run_day,
    schedule_every,
    validation_start,
)
from spark_jobs.control.orchestration.standalone import session_members, stop_session
from spark_jobs.local.platform_stack import platform_start_date
from spark_jobs.settings import ConfigError, load_settings

UTC = datetime.UTC


def context(start=None, end=None, run_after=None, params=None) -> dict:
    run_after = run_after or end or datetime.datetime(2026, 3, 1, tzinfo=UTC)
    values = {
        "dag_run": SimpleNamespace(run_after=run_after, dag_id="daily_validation"),
        "run_id": "r1",
        "params": params or {},
    }
    if start is not None:  # Airflow leaves the interval keys out for runs without one
        values.update(data_interval_start=start, data_interval_end=end)
    return values


def test_a_scheduled_run_covers_its_data_interval_day():
    start = datetime.datetime(2026, 1, 2, tzinfo=UTC)
    assert run_day(context(start, start + datetime.timedelta(days=1))) == datetime.date(2026, 1, 2)


def test_a_run_without_logical_date_covers_the_day_before_it_ran():
    moment = datetime.datetime(2026, 1, 3, 5, 0, tzinfo=UTC)
    assert run_day(context(run_after=moment)) == datetime.date(2026, 1, 2)


def test_the_day_param_overrides_the_interval_and_is_checked():
    start = datetime.datetime(2026, 1, 2, tzinfo=UTC)
    chosen = context(start, start, params={"day": "2026-01-01"})
    assert run_day(chosen) == datetime.date(2026, 1, 1)
    with pytest.raises(ValueError, match="param 'day' must be a date"):
        run_day(context(start, start, params={"day": "yesterday"}))


def test_publication_time_is_the_interval_end_else_run_after():
    end = datetime.datetime(2026, 1, 5, 0, 5, tzinfo=UTC)
    assert as_of_ms(context(end, end)) == int(end.timestamp() * 1000)
    assert as_of_ms(context(run_after=end)) == int(end.timestamp() * 1000)


def test_validation_needs_a_start_date():
    with pytest.raises(ConfigError, match="TIDELINE_VALIDATION__START_DATE"):
        validation_start(load_settings(environ={}))
    settings = load_settings(environ={}, overrides={"validation": {"start_date": "2026-01-01"}})
    assert validation_start(settings) == datetime.datetime(2026, 1, 1, tzinfo=UTC)


def test_the_platform_remembers_its_first_start_date(tmp_path):
    settings = load_settings(environ={}, overrides={"airflow": {"home": str(tmp_path)}})
    first = platform_start_date(settings, today=datetime.date(2026, 2, 10))
    assert first == "2026-02-09"
    assert platform_start_date(settings, today=datetime.date(2026, 3, 1)) == first
    configured = load_settings(
        environ={}, overrides={"validation": {"start_date": "2026-01-01"}}
    )
    assert platform_start_date(configured) == "2026-01-01"


def test_airflow_gets_every_setting_from_the_frozen_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    settings = load_settings(
        environ={},
        overrides={"lake": {"root": "lake"}, "airflow": {"home": "home", "port": 8123},
                   "experiments": {"window": "1m"}},
    )
    frozen = write_settings_file(settings, tmp_path / "tideline.yaml")
    base = {"PATH": "/usr/bin", "TIDELINE_LAKE__ROOT": "elsewhere", "TIDELINE_CONFIG": "x.yaml"}
    env = airflow_environment(settings, base, settings_file=frozen, scheduled=False)

    assert "TIDELINE_LAKE__ROOT" not in env
    seen = load_settings(environ=env)
    assert seen.lake.root == str(tmp_path / "lake")  # absolute: tasks run elsewhere
    assert seen.experiments == settings.experiments
    assert env["AIRFLOW_HOME"] == str(tmp_path / "home")
    assert (env["AIRFLOW__API__HOST"], env["AIRFLOW__API__PORT"]) == ("127.0.0.1", "8123")
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://127.0.0.1:8123/execution/"
    assert env["AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE"] == "False"
    assert env["AIRFLOW__CORE__LOAD_EXAMPLES"] == "False"
    assert env["PATH"].split(os.pathsep)[0] == os.path.dirname(sys.executable)
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == f"sqlite:///{tmp_path / 'home'}/airflow.db"
    module, _, name = env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS"].rpartition(".")
    assert getattr(importlib.import_module(module), name)["timeout"] >= 30  # waits for the lock

    postgres = "postgresql+psycopg2://airflow:pw@db.internal/airflow"
    base["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = postgres
    env = airflow_environment(settings, base, settings_file=frozen)
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == postgres  # a real database wins
    assert "AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS" not in env


def test_every_airflow_variable_names_an_option_airflow_has(tmp_path, monkeypatch):
    """A misspelt AIRFLOW__SECTION__KEY is silently ignored by Airflow: check each one."""
    import yaml

    monkeypatch.chdir(tmp_path)
    settings = load_settings(environ={}, overrides={"airflow": {"home": "home"}})
    env = airflow_environment(settings, {"PATH": "/usr/bin"})
    airflow_package = importlib.util.find_spec("airflow")  # not imported: it sets itself up
    assert airflow_package is not None and airflow_package.submodule_search_locations
    template = (Path(airflow_package.submodule_search_locations[0]) / "config_templates"
                / "config.yml")
    options = {
        (section, key)
        for section, body in yaml.safe_load(template.read_text()).items()
        for key in body["options"]
    }
    ours = [name for name in env if name.startswith("AIRFLOW__")]
    unknown = [
        name for name in ours
        if tuple(name.lower().split("__")[1:3]) not in options
    ]
    assert len(ours) > 15 and unknown == []


def test_a_slow_parse_does_not_make_a_dag_stale(tmp_path, monkeypatch):
    """Stale means 'last parsed more than the threshold before its file': a parse that times
    out must not be enough, so the threshold outlasts a parse and its retry."""
    monkeypatch.chdir(tmp_path)
    settings = load_settings(environ={}, overrides={"airflow": {"home": "home"}})
    env = airflow_environment(settings, {"PATH": "/usr/bin"})
    import_timeout = float(env["AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT"])
    parse_timeout = int(env["AIRFLOW__DAG_PROCESSOR__DAG_FILE_PROCESSOR_TIMEOUT"])
    reparse = int(env["AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL"])
    threshold = int(env["AIRFLOW__DAG_PROCESSOR__STALE_DAG_THRESHOLD"])
    assert 30 < import_timeout < parse_timeout
    assert threshold > 2 * (parse_timeout + reparse)


def test_stopping_a_session_also_stops_children_in_their_own_process_group():
    spawn_grandchild = (
        "import os, subprocess, time;"
        "subprocess.Popen(['sleep', '60'], preexec_fn=os.setpgrp);"
        "time.sleep(60)"
    )
    leader = subprocess.Popen([sys.executable, "-c", spawn_grandchild], start_new_session=True)
    deadline = time.monotonic() + 10
    while len(session_members(leader.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(session_members(leader.pid)) == 2
    stop_session(leader, grace_s=5)
    assert session_members(leader.pid) == []


def test_a_failed_task_alert_names_the_task_and_the_first_line_of_its_error():
    from types import SimpleNamespace

    from spark_jobs.control.orchestration.callbacks import failure_alert_fields

    ti = SimpleNamespace(dag_id="daily_validation", task_id="recompute", try_number=2)
    fields = failure_alert_fields(
        {"ti": ti, "exception": RuntimeError("spark-submit exited 1\nlog tail ...")}
    )
    assert fields["source"] == "daily_validation" and fields["kind"] == "task_failed"
    assert fields["summary"] == "task recompute failed: spark-submit exited 1"
    assert fields["details"] == {"task_id": "recompute", "try_number": 2}
    assert failure_alert_fields({"ti": ti})["summary"] == "task recompute failed: see the task log"


@pytest.mark.parametrize(
    ("interval", "schedule"),
    [
        ("5m", "*/5 * * * *"),  # the default experiments.snapshot_interval
        ("1m", "* * * * *"),
        ("2h", "0 */2 * * *"),
        ("1d", "0 0 * * *"),
        ("7m", datetime.timedelta(minutes=7)),  # does not divide the hour
        ("30s", datetime.timedelta(seconds=30)),
    ],
)
def test_the_snapshot_dag_runs_every_snapshot_interval(interval, schedule):
    settings = load_settings(environ={}, overrides={"experiments": {"snapshot_interval": interval}})
    assert schedule_every(settings.experiments.snapshot_interval_ms) == schedule
