"""The runner's final status is the last word in a job's progress file."""

from __future__ import annotations

from types import SimpleNamespace

from spark_jobs.streaming.progress import ProgressFileListener, read_progress


def test_a_late_idle_heartbeat_does_not_overwrite_the_final_status(make_settings):
    settings = make_settings()
    listener = ProgressFileListener(settings, "job")
    listener.onQueryStarted(SimpleNamespace(name="job", id="q", runId="r1"))
    listener.write_final(None)
    listener.onQueryIdle(SimpleNamespace(id="q", runId="r1"))  # delivered late by the bus
    assert read_progress(settings, "job")["status"] == "stopped"


def test_an_idle_heartbeat_is_written_while_the_query_runs(make_settings):
    settings = make_settings()
    listener = ProgressFileListener(settings, "job")
    listener.onQueryStarted(SimpleNamespace(name="job", id="q", runId="r1"))
    listener.onQueryIdle(SimpleNamespace(id="q", runId="r1"))
    assert read_progress(settings, "job")["status"] == "idle"
    listener.onQueryIdle(SimpleNamespace(id="q", runId="other-run"))
    assert read_progress(settings, "job")["status"] == "idle"
