"""The monitor's pure parts: lag from offsets, every health rule, restart windows, alert
repetition, pid-file identity (a recycled pid is not the job) and the summary table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import psutil
import pytest

from spark_jobs.control.monitor.alerting import alerts_due
from spark_jobs.control.monitor.health import RunFacts, assess_health
from spark_jobs.control.monitor.lag import consumed_offsets, offsets_lag, partition_of
from spark_jobs.control.monitor.pidfile import (
    RunRecord,
    identifies,
    pid_path,
    read_record,
    write_record,
)
from spark_jobs.control.monitor.processes import ProcessInfo, read_process
from spark_jobs.control.monitor.reports import last_batch_report
from spark_jobs.control.monitor.restarts import (
    load_restarts,
    recent_restarts,
    record_restart,
    restart_budget_spent,
)
from spark_jobs.control.monitor.summary import age_text, describe, render_summary
from spark_jobs.settings import MonitorSettings

MIN = 60_000
NOW = 1_800_000_000_000
MONITOR = MonitorSettings(
    stale_after_ms=3 * MIN, max_lag=1000, restart_limit=3, restart_window_ms=30 * MIN,
    stop_timeout_ms=MIN,
)
EVENTS = ("events",)
FILTERED = ("filtered_events", "filtered_experiment_activations")


def batch(end: dict | str, reported_ms: int = NOW - 5_000, **fields) -> dict:
    return {
        "status": "running", "batchId": 7, "reported_at_ms": reported_ms,
        "inputRowsPerSecond": 1200.0, "processedRowsPerSecond": 1500.5,
        "eventTime": {"watermark": "2026-11-22T14:36:37.524Z"},
        "sources": [{"description": "PythonMicroBatchStream", "endOffset": end}],
        **fields,
    }


def judge(run: RunFacts, latest=None, last_batch="same", ends=None, topics=EVENTS,
          restarts=(), monitor=MONITOR):
    return assess_health(
        "filter_events", run, latest, latest if last_batch == "same" else last_batch,
        ends, topics, NOW, list(restarts), monitor,
    )


def kinds(health) -> list[str]:
    return [p.kind for p in health.problems]


RUNNING = RunFacts(running=True, managed=True, started_at_ms=NOW - 10 * MIN)
DIED = RunFacts(running=False, managed=True, started_at_ms=NOW - 10 * MIN)


# ------------------------------------------------------------------ lag


def test_lag_of_a_single_topic_job_uses_partition_keys():
    progress = batch({"0": 100, "1": 250})
    assert offsets_lag(progress, {"events": {0: 130, 1: 250}}, EVENTS) == 30


def test_lag_of_a_two_topic_source_uses_topic_slash_partition_keys_and_json_text():
    end = json.dumps({"filtered_events/0": 10, "filtered_events/1": 20,
                      "filtered_experiment_activations/0": 5})
    ends = {"filtered_events": {0: 15, 1: 20},
            "filtered_experiment_activations": {0: 9, 1: 3}}
    # 5 + 0 + 4, and partition 1 of the activations, never read, counts from offset 0: 3
    assert offsets_lag(batch(end), ends, FILTERED) == 12


def test_lag_is_unknown_without_a_batch_or_without_end_offsets_and_never_negative():
    assert offsets_lag({"status": "started"}, {"events": {0: 5}}, EVENTS) is None
    assert offsets_lag(batch({"0": 5}), None, EVENTS) is None
    assert offsets_lag(None, {"events": {0: 5}}, EVENTS) is None
    assert offsets_lag(batch({"0": 50}), {"events": {0: 40}}, EVENTS) == 0


def test_offset_keys_are_parsed_against_the_jobs_topics():
    assert partition_of("3", EVENTS) == ("events", 3)
    assert partition_of("filtered_events/1", FILTERED) == ("filtered_events", 1)
    assert partition_of("3", FILTERED) is None  # ambiguous with two topics
    assert partition_of("other/1", FILTERED) is None
    assert consumed_offsets(batch({"0": 4, "x": 1}), EVENTS) == {("events", 0): 4}


# ------------------------------------------------------------------ health rules


def test_a_running_job_that_reports_and_keeps_up_is_healthy_with_its_figures():
    health = judge(RUNNING, batch({"0": 90}), ends={"events": {0: 100}})
    assert health.healthy and not health.needs_restart
    assert (health.lag, health.batch_id, health.input_rows_per_s) == (10, 7, 1200.0)
    assert health.processed_rows_per_s == 1500.5
    assert health.watermark == "2026-11-22T14:36:37.524Z"
    assert health.last_report_age_ms == 5_000


def test_a_started_job_whose_process_is_gone_is_down_and_needs_a_restart():
    health = judge(DIED, batch({"0": 90}), ends={"events": {0: 100}})
    assert kinds(health) == ["down"] and health.needs_restart
    assert health.lag == 10  # the backlog is still known from its last batch


def test_a_failed_query_is_failed_with_its_exception_not_down():
    latest = {"status": "failed", "exception": "RangeReadError: gone\n  at line 1",
              "reported_at_ms": NOW - MIN}
    health = judge(DIED, latest, last_batch=batch({"0": 1}))
    assert kinds(health) == ["failed"] and health.needs_restart
    assert health.exception == "RangeReadError: gone"
    assert "RangeReadError: gone" in health.problems[0].message


def test_a_failure_reported_before_the_current_process_started_is_history():
    latest = {"status": "failed", "exception": "boom", "reported_at_ms": NOW - 20 * MIN}
    fresh = RunFacts(running=True, managed=True, started_at_ms=NOW - MIN)
    health = judge(fresh, latest, last_batch=None)
    assert health.healthy and health.exception is None


def test_a_failed_report_of_a_job_the_monitor_does_not_manage_is_not_a_problem():
    latest = {"status": "failed", "exception": "boom", "reported_at_ms": NOW - MIN}
    health = judge(RunFacts(running=False, managed=False), latest, last_batch=None)
    assert health.healthy and not health.needs_restart


def test_a_job_stopped_on_purpose_is_not_a_problem():
    latest = {"status": "stopped", "exception": None, "reported_at_ms": NOW - 20 * MIN}
    health = judge(RunFacts(running=False, managed=False), latest, last_batch=batch({"0": 1}))
    assert health.healthy and not health.running_elsewhere


def test_no_report_for_stale_after_with_input_waiting_is_stale():
    old = batch({"0": 90}, reported_ms=NOW - 4 * MIN)
    health = judge(RUNNING, old, ends={"events": {0: 100}})
    assert kinds(health) == ["stale"]
    assert health.problems[0].observed == 4 * MIN
    assert health.problems[0].threshold == 3 * MIN


def test_an_idle_job_that_has_read_everything_is_not_stale():
    old = batch({"0": 100}, reported_ms=NOW - 30 * MIN)
    assert judge(RUNNING, old, ends={"events": {0: 100}}).healthy


def test_silence_with_unknown_lag_is_stale():
    old = batch({"0": 100}, reported_ms=NOW - 4 * MIN)
    assert kinds(judge(RUNNING, old, ends=None)) == ["stale"]


def test_a_new_process_is_judged_stale_from_its_start_not_from_its_predecessors_report():
    previous = batch({"0": 10}, reported_ms=NOW - 60 * MIN)
    fresh = RunFacts(running=True, managed=True, started_at_ms=NOW - MIN)
    assert judge(fresh, previous, ends={"events": {0: 100}}).healthy
    starting = RunFacts(running=True, managed=True, started_at_ms=NOW - 4 * MIN)
    assert kinds(judge(starting, previous, ends={"events": {0: 100}})) == ["stale"]


def test_more_than_max_lag_records_behind_is_lagging():
    at_limit = judge(RUNNING, batch({"0": 0}), ends={"events": {0: 1000}})
    assert at_limit.healthy
    over = judge(RUNNING, batch({"0": 0}), ends={"events": {0: 1001}})
    assert kinds(over) == ["lagging"]
    assert (over.problems[0].observed, over.problems[0].threshold) == (1001, 1000)


def test_a_down_job_is_not_also_reported_lagging():
    assert kinds(judge(DIED, batch({"0": 0}), ends={"events": {0: 5000}})) == ["down"]


def test_a_crash_after_restart_limit_restarts_within_the_window_is_a_restart_loop():
    restarts = [NOW - 25 * MIN, NOW - 10 * MIN, NOW - MIN]
    health = judge(DIED, batch({"0": 1}), restarts=restarts)
    assert kinds(health) == ["down", "restart_loop"]
    assert not health.needs_restart
    assert health.recent_restarts == 3
    assert health.problems[1].threshold == 3


def test_restarts_that_left_the_window_restore_the_budget():
    restarts = [NOW - 40 * MIN, NOW - 10 * MIN, NOW - MIN]
    health = judge(DIED, batch({"0": 1}), restarts=restarts)
    assert kinds(health) == ["down"] and health.needs_restart


def test_a_running_job_after_many_restarts_is_not_in_a_restart_loop():
    restarts = [NOW - 3 * MIN, NOW - 2 * MIN, NOW - MIN]
    assert judge(RUNNING, batch({"0": 1}), ends={"events": {0: 1}}, restarts=restarts).healthy


def test_a_fresh_report_of_a_job_the_monitor_did_not_start_means_it_runs_elsewhere():
    unmanaged = RunFacts(running=False, managed=False)
    assert judge(unmanaged, batch({"0": 1}, reported_ms=NOW - MIN)).running_elsewhere
    assert not judge(unmanaged, batch({"0": 1}, reported_ms=NOW - 10 * MIN)).running_elsewhere


def test_the_last_report_before_the_monitors_own_stop_is_not_a_run_elsewhere():
    stopped = RunFacts(running=False, managed=False, started_at_ms=NOW - 10 * MIN,
                       stopped_at_ms=NOW - MIN)
    before_stop = batch({"0": 1}, reported_ms=NOW - MIN - 500)
    assert not judge(stopped, before_stop).running_elsewhere
    assert judge(stopped, batch({"0": 1}, reported_ms=NOW - 30_000)).running_elsewhere


# ------------------------------------------------------------------ restarts and alerts


def test_recent_restarts_keep_only_the_window_ending_now():
    window = 30 * MIN
    times = [NOW - window, NOW - window + 1, NOW - MIN, NOW]
    assert recent_restarts(times, NOW, window) == [NOW - window + 1, NOW - MIN, NOW]
    assert restart_budget_spent(times, NOW, 3, window)
    assert not restart_budget_spent(times, NOW, 4, window)


def test_the_restart_history_file_drops_restarts_older_than_the_window(make_settings):
    settings = make_settings(monitor={"restart_window": "10m"})
    record_restart(settings, "filter_events", NOW - 20 * MIN)
    record_restart(settings, "filter_events", NOW - 5 * MIN)
    assert record_restart(settings, "filter_events", NOW) == [NOW - 5 * MIN, NOW]
    assert load_restarts(settings, "filter_events") == [NOW - 5 * MIN, NOW]


def test_a_lasting_problem_alerts_once_per_repeat_period_and_again_after_it_clears():
    due, memory = alerts_due(["lagging"], False, {}, NOW, 30 * MIN)
    assert due == ["lagging"] and memory == {}
    memory["lagging"] = NOW  # the caller remembers what it could send
    due, memory = alerts_due(["lagging"], False, memory, NOW + MIN, 30 * MIN)
    assert due == [] and memory == {"lagging": NOW}
    due, _ = alerts_due(["lagging"], False, memory, NOW + 30 * MIN, 30 * MIN)
    assert due == ["lagging"]
    _, cleared = alerts_due([], False, memory, NOW + 2 * MIN, 30 * MIN)
    assert cleared == {}
    assert alerts_due(["lagging"], False, cleared, NOW + 3 * MIN, 30 * MIN)[0] == ["lagging"]


def test_every_restarted_crash_alerts_but_a_lasting_restart_loop_does_not():
    memory = {"down": NOW - MIN, "restart_loop": NOW - MIN}
    assert alerts_due(["down"], True, memory, NOW, 30 * MIN)[0] == ["down"]
    assert alerts_due(["down", "restart_loop"], False, memory, NOW, 30 * MIN)[0] == []


# ------------------------------------------------------------------ pid files and /proc


SIGNATURE = ("/app/spark_jobs/__main__.py", "job", "run", "filter_events")


def record_of(pid: int, created: float | None) -> RunRecord:
    return RunRecord("filter_events", pid, created, NOW, ("spark-submit", *SIGNATURE),
                     SIGNATURE, "/lake/_logs/filter_events.log")


def process(pid: int = 42, created: float = 1000.0, status: str = "sleeping",
            cmdline: tuple[str, ...] = ("java", "SparkSubmit", *SIGNATURE)) -> ProcessInfo:
    return ProcessInfo(pid, status, 1, pid, created, cmdline)


def test_the_pid_file_identifies_its_process_by_pid_start_time_and_command_line():
    record = record_of(42, 1000.0)
    assert identifies(record, process())
    assert identifies(record, process(created=1000.5)), "the boot time moved with the clock"
    assert not identifies(record, process(created=1002.0)), "a recycled pid starts later"
    assert not identifies(record, process(cmdline=("bash",))), "another program"
    assert not identifies(record, process(status="zombie")), "exited, not yet reaped"
    assert not identifies(record, None)
    assert not identifies(record_of(42, None), process()), "never seen alive"


def test_a_recycled_pid_is_not_mistaken_for_the_job_on_the_real_proc(make_settings):
    signature_args = list(SIGNATURE)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                                *signature_args])
    try:
        deadline = time.monotonic() + 10
        info = read_process(sleeper.pid)
        while info is None or info.cmdline[-4:] != SIGNATURE:
            assert time.monotonic() < deadline
            time.sleep(0.01)
            info = read_process(sleeper.pid)
        settings = make_settings()
        write_record(settings, record_of(sleeper.pid, info.create_time))
        record = read_record(settings, "filter_events")
        assert record == record_of(sleeper.pid, info.create_time), "the file round-trips"
        assert identifies(record, read_process(sleeper.pid))
        # the same pid with another start time is what a recycled pid looks like
        assert not identifies(record_of(sleeper.pid, info.create_time + 2), info)
        # our own process has a pid and a start time, but not the job's command line
        me = read_process(os.getpid())
        assert not identifies(record_of(os.getpid(), me.create_time), me)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert not identifies(record, read_process(sleeper.pid))


def test_a_pid_file_of_the_previous_version_still_tells_its_process_from_a_recycled_pid(
        make_settings):
    """Pid files written before psutil hold `start_ticks` (clock ticks after boot): read as
    the same instant, they identify the job they recorded and no other process."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                                *SIGNATURE])
    try:
        info = read_process(sleeper.pid)
        while info is None or info.cmdline[-4:] != SIGNATURE:
            time.sleep(0.01)
            info = read_process(sleeper.pid)
        ticks = round((info.create_time - psutil.boot_time()) * os.sysconf("SC_CLK_TCK"))
        settings = make_settings()
        old = {**record_of(sleeper.pid, None).to_json(), "start_ticks": ticks}
        del old["create_time"]
        path = pid_path(settings, "filter_events")
        path.parent.mkdir(parents=True, exist_ok=True)
        for ticks_then, same in ((ticks, True), (ticks - 500, False), (None, False)):
            path.write_text(json.dumps({**old, "start_ticks": ticks_then}))
            record = read_record(settings, "filter_events")
            assert record is not None, "an old pid file is still a record"
            assert identifies(record, read_process(sleeper.pid)) is same, ticks_then
        path.write_text(json.dumps({k: v for k, v in old.items() if k != "start_ticks"}))
        assert read_record(settings, "filter_events") is None, "no start time: not a record"
    finally:
        sleeper.kill()
        sleeper.wait()


def test_the_monitor_knows_every_job_of_the_runner():
    from spark_jobs.catalog import JOB_NAMES, UnknownJobError, job
    from spark_jobs.settings import STREAMING_JOBS

    assert set(JOB_NAMES) == set(STREAMING_JOBS)
    assert job("filter_events").name == "filter_events"
    with pytest.raises(UnknownJobError, match="known: filter_events"):
        job("nope")


def test_the_last_batch_comes_from_the_history_once_the_job_reported_stopped(make_settings):
    settings = make_settings()
    folder = settings.lake.root + "/_progress"
    os.makedirs(folder)
    lines = [batch({"0": 1}, batchId=1), batch({"0": 2}, batchId=2),
             {"status": "stopped", "exception": None, "reported_at_ms": NOW}]
    with open(f"{folder}/filter_events.jsonl", "w") as out:
        out.write("".join(json.dumps(line) + "\n" for line in lines))
    found = last_batch_report(settings, "filter_events", lines[-1])
    assert found is not None and found["batchId"] == 2
    assert last_batch_report(settings, "filter_events", lines[0]) == lines[0]
    assert last_batch_report(settings, "filter_activations", None) is None


# ------------------------------------------------------------------ text


def test_the_summary_is_an_aligned_table_and_the_log_line_says_what_happened():
    statuses = [
        {"job": "filter_events", "state": "running", "pid": 4242, "input_rows_per_s": 1234.4,
         "processed_rows_per_s": 2000.0, "lag": 12, "watermark": "2026-11-22T14:36:37Z",
         "last_report_age_ms": 4_000, "problems": [], "actions": []},
        {"job": "experiment_metrics", "state": "restarted", "pid": 77, "lag": 1_250_000,
         "last_report_age_ms": 185_000,
         "problems": [{"kind": "down", "message": "process is gone"}],
         "actions": ["restarted from its checkpoint as pid 77"]},
    ]
    lines = render_summary(statuses).splitlines()
    assert lines[0].split()[:3] == ["JOB", "STATE", "PID"]
    starts = {line.index(word) for line, word in zip(lines, ("STATE", "running", "restarted"),
                                                     strict=True)}
    assert len(starts) == 1, "columns line up"
    assert "1,250,000" in lines[2] and "3m05s" in lines[2] and "down" in lines[2]
    assert lines[1].endswith("-")
    line = describe(statuses[1])
    assert line.startswith("experiment_metrics: restarted (pid 77)")
    assert "down: process is gone" in line and "did: restarted" in line
    assert "healthy" in describe(statuses[0])
    assert [age_text(ms) for ms in (None, 999, 65_000, 7_260_000)] == ["-", "0s", "1m05s",
                                                                        "2h01m"]


def test_a_process_between_two_execs_is_read_again_not_taken_for_dead(monkeypatch):
    """spark-submit's scripts exec one another: /proc shows an empty command line for a
    moment, which alone must not make a running job look dead (and be started twice)."""
    from spark_jobs.control.monitor import supervisor
    record = supervisor.RunRecord("filter_events", 42, 7.0, NOW, ("spark-submit",),
                                  supervisor.job_signature("filter_events"), "log")
    views = iter([ProcessInfo(42, "running", 1, 42, 7.0, ()),
                  ProcessInfo(42, "running", 1, 42, 7.0, ("java", *record.signature))])
    monkeypatch.setattr(supervisor, "read_process", lambda pid: next(views))
    monkeypatch.setattr(supervisor, "_reap", lambda pid: None)
    assert supervisor.is_alive(record)
    gone = iter([ProcessInfo(42, "running", 1, 42, 7.0, ()), None])
    monkeypatch.setattr(supervisor, "read_process", lambda pid: next(gone))
    assert not supervisor.is_alive(record)
