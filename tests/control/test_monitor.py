"""The monitor against real spark-submit applications, a real broker and a real lake.

A job started by `watch_job` is SIGKILLed; the next pass finds it down, alerts and restarts
it, and it resumes from its checkpoint with nothing lost and nothing twice. A job that
keeps dying is left down as a restart loop. `stop_all_jobs` leaves no process behind.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from reference.metrics_reference import ReferenceSettings, clean_events, decode_messages

from spark_jobs.cli import main
from spark_jobs.control.monitor import is_running, job_status, stop_all_jobs, supervisor, watch_job
from spark_jobs.control.monitor.pidfile import read_record
from spark_jobs.control.monitor.processes import session_members
from spark_jobs.control.monitor.reports import latest_report
from spark_jobs.control.submit import ENTRY_POINT
from spark_jobs.experiments.traffic import TrafficSpec, generate, produce
from spark_jobs.streaming.lake.delta import read_arrow, table_exists

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.kafka]

MIN = 60_000
JOB = "filter_events"
RUN_URL = "http://127.0.0.1:8080/dags/streaming_jobs/runs/scheduled__1"
CONFIG = {
    "spark": {"master": "local[1]"},
    "experiments": {"period": "40m", "window": "5m", "lateness": "1m", "dedup_ttl": "1m",
                    "cap_per_user_hour": 300},
    "jobs": {"max_records_per_trigger": 1500, "trigger": "500ms"},
    "monitor": {"stop_timeout": "20s"},
}


def _wait(condition: Callable[[], bool], timeout_s: float, what: str, settings=None) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            tail = ""
            if settings is not None:
                log = settings.lake.root + f"/_logs/{JOB}.log"
                with contextlib.suppress(OSError), open(log) as handle:
                    tail = "\n" + "".join(handle.readlines()[-40:])
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}{tail}")
        time.sleep(0.25)


def _live(session: int) -> list[int]:
    return [p.pid for p in session_members(session) if p.alive]


def _alerts(settings) -> pd.DataFrame:
    uri = settings.lake.table("alerts")
    return read_arrow(uri).to_pandas() if table_exists(uri) else pd.DataFrame(columns=["kind"])


def _raw_events(settings) -> pd.DataFrame:
    uri = settings.lake.table("raw_events")
    return read_arrow(uri).to_pandas() if table_exists(uri) else pd.DataFrame()


def _accepted_events(settings, specs: list[TrafficSpec]) -> pd.DataFrame:
    """What filter_events must accept (critical types within the hourly cap), recomputed by
    the independent reference: its clean events plus the duplicates it then removed."""
    values = [r.value for spec in specs for r in generate(spec) if r.topic == "events"]
    events, _ = decode_messages(values, "events")
    clean, stats = clean_events(events, ReferenceSettings.of(settings.experiments))
    return clean.assign(expected=stats["events_clean"] + stats["events_duplicate"])


def _kill_sessions(sessions: list[int]) -> None:
    for session in sessions:
        for pid in _live(session):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_killed_job_is_restarted_by_the_watch_and_resumes_exactly_once(
    own_broker, make_settings, caplog
):
    settings = make_settings(own_broker, **CONFIG)
    before = TrafficSpec.from_settings(settings.experiments, seed=5, duration_ms=30 * MIN,
                                       n_users=150)
    after = TrafficSpec.from_settings(settings.experiments, seed=6, duration_ms=30 * MIN,
                                      n_users=150, start_ms=before.start_ms + 30 * MIN)
    produce(before, settings, progress=False)
    sessions: list[int] = []
    try:
        first = watch_job(settings, JOB, RUN_URL)
        assert (first["state"], first["problems"], first["alerts"]) == ("started", [], [])
        sessions.append(first["pid"])
        _wait(lambda: (latest_report(settings, JOB) or {}).get("status") == "running", 150,
              "the first progress report", settings)

        os.killpg(first["pid"], signal.SIGKILL)
        _wait(lambda: not is_running(settings, JOB), 10, "the killed job to be gone")
        produce(after, settings, progress=False)  # only the restarted job can read these

        second = watch_job(settings, JOB, RUN_URL)
        assert second["state"] == "restarted"
        assert [p["kind"] for p in second["problems"]] == ["down"]
        assert second["alerts"] == ["job_down"] and second["pid"] != first["pid"]
        sessions.append(second["pid"])
        alert = _alerts(settings).iloc[0]
        assert (alert.source, alert.kind, alert.run_url) == ("streaming_jobs", "job_down",
                                                             RUN_URL)
        assert "restarted from its checkpoint" in alert.summary

        accepted = _accepted_events(settings, [before, after])
        expected = int(accepted.expected.iloc[0])
        _wait(lambda: len(_raw_events(settings)) >= expected, 150,
              f"{expected} raw_events rows", settings)
        _wait(lambda: job_status(settings, JOB)["lag"] == 0, 30, "lag 0", settings)
        _wait(lambda: (latest_report(settings, JOB) or {}).get("status") == "idle", 30,
              "an idle heartbeat once everything is read", settings)

        third = watch_job(settings, JOB, RUN_URL)
        assert (third["state"], third["healthy"], third["pid"]) == ("running", True,
                                                                   second["pid"])
        assert third["batch_id"] is not None and third["watermark"]
        raw = _raw_events(settings)
        assert len(raw) == expected, "nothing missing, nothing twice"
        assert not raw.duplicated(["topic", "partition", "offset"]).any()
        key = ["user_id", "event_type", "ts"]
        assert set(map(tuple, raw[key].to_numpy())) == set(map(tuple, accepted[key].to_numpy()))

        with caplog.at_level(logging.INFO, logger="spark_jobs.control.monitor.supervisor"):
            assert stop_all_jobs(settings) == [JOB]
        assert f"{JOB} (pid {second['pid']}) stopped cleanly" in caplog.text, "not killed"
        assert all(not _live(session) for session in sessions), "a process was left behind"
        assert read_record(settings, JOB).stopped
        assert latest_report(settings, JOB)["status"] == "stopped", "the runner's final report"
        assert job_status(settings, JOB)["state"] == "stopped"
    finally:
        stop_all_jobs(settings)
        _kill_sessions(sessions)


def test_a_job_that_keeps_dying_is_left_down_as_a_restart_loop(make_settings):
    # spark-submit rejects the master at once: the job dies within seconds, every time
    settings = make_settings(
        "127.0.0.1:9", spark={"master": "bogus://nowhere"},
        monitor={"restart_limit": 2, "restart_window": "10m"},
    )
    sessions: list[int] = []
    try:
        passes = []
        for _ in range(5):
            status = watch_job(settings, JOB)
            passes.append(status)
            if status["pid"] is not None:
                sessions.append(status["pid"])
            _wait(lambda: not is_running(settings, JOB), 60, "the job to die")
        assert [s["state"] for s in passes] == ["started", "restarted", "restarted", "down",
                                                "down"]
        assert [s["alerts"] for s in passes] == [[], ["job_down"], ["job_down"],
                                                 ["restart_loop"], []]
        assert [p["kind"] for p in passes[3]["problems"]] == ["down", "restart_loop"]
        assert passes[3]["actions"] == [] and not passes[4]["healthy"]
        assert sorted(_alerts(settings).kind) == ["job_down", "job_down", "restart_loop"]
        with open(passes[0]["log"]) as log:
            assert "Master must either be yarn" in log.read(), "spark-submit's error is logged"
    finally:
        stop_all_jobs(settings)
        _kill_sessions(sessions)
    assert all(not _live(session) for session in sessions)


def _sleeper_submit(settings, cli_args, app_name) -> list[str]:
    """A stand-in for spark-submit: a process with the job's command line that just waits."""
    return [sys.executable, "-c", "import time; time.sleep(120)", str(ENTRY_POINT), *cli_args]


def test_a_live_process_whose_query_failed_is_stopped_and_replaced(make_settings, monkeypatch):
    monkeypatch.setattr(supervisor, "spark_submit_command", _sleeper_submit)
    settings = make_settings("127.0.0.1:9")
    sessions: list[int] = []
    try:
        first = watch_job(settings, JOB)
        assert first["state"] == "started" and is_running(settings, JOB)
        sessions.append(first["pid"])
        progress = Path(settings.lake.root) / "_progress"
        progress.mkdir(parents=True)
        (progress / f"{JOB}.json").write_text(json.dumps({
            "status": "failed", "exception": "RangeReadError: offsets deleted\n at ...",
            "reported_at_ms": int(time.time() * 1000) + 1,
        }))
        second = watch_job(settings, JOB, RUN_URL)
        assert second["state"] == "restarted"
        assert second["problems"] == [{"kind": "failed",
                                       "message": "query failed: RangeReadError: offsets deleted"}]
        assert second["actions"][0] == f"stopped the failed process {first['pid']}"
        assert second["alerts"] == ["job_failed"] and second["restarts_in_window"] == 1
        sessions.append(second["pid"])
        assert not _live(first["pid"]) and is_running(settings, JOB)
        assert watch_job(settings, JOB)["state"] == "running", "the old failure is history"
    finally:
        stop_all_jobs(settings)
        _kill_sessions(sessions)
    assert all(not _live(session) for session in sessions)


def test_jobs_status_and_stop_on_the_command_line(make_settings, monkeypatch, capsys):
    settings = make_settings()
    monkeypatch.setenv("TIDELINE_LAKE__ROOT", settings.lake.root)
    monkeypatch.delenv("TIDELINE_CONFIG", raising=False)
    assert main(["jobs", "status"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("JOB") and len(table) == 4
    assert all(line.split()[1] == "stopped" for line in table[1:])
    assert main(["jobs", "stop", JOB]) == 0
    assert capsys.readouterr().out.strip() == f"{JOB}: was not running"
    assert main(["jobs", "start", "no_such_job"]) == 2
    monkeypatch.setenv("TIDELINE_MONITOR__JOBS", "[experiment_metrics, training_samples]")
    assert main(["jobs", "status"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in table[1:]] == ["experiment_metrics", "training_samples"]


def test_the_monitor_deploys_the_other_systems_jobs_when_configured(own_broker, make_settings):
    """monitor.jobs adds training_samples: the watch starts it with spark-submit, it reports
    progress and lag, and stop_all_jobs stops it cleanly."""
    settings = make_settings(own_broker, monitor={"jobs": ["training_samples"]})
    sessions: list[int] = []
    try:
        from spark_jobs.control.monitor.watch import watch_all_jobs

        first = watch_all_jobs(settings, RUN_URL)
        assert [(s["job"], s["state"]) for s in first] == [("training_samples", "started")]
        sessions.append(first[0]["pid"])
        _wait(lambda: (latest_report(settings, "training_samples") or {}).get("status")
              in ("running", "idle"), 150, "a progress report", settings)
        again = watch_job(settings, "training_samples", RUN_URL)
        assert (again["state"], again["lag"]) == ("running", 0), again
        assert stop_all_jobs(settings) == ["training_samples"]
        assert not any(_live(session) for session in sessions)
    finally:
        stop_all_jobs(settings)
        _kill_sessions(sessions)
