"""The daily validation end to end on three days of history: a clean lake passes every check
of every case; a streaming table corrupted in each of the seed's three ways fails the right
check, stores a failed row, raises ValidationFailed and sends an alert naming the place."""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from deltalake import write_deltalake
from helpers.history import HistoryLake, copy_history
from helpers.steps import StepRecorder

from spark_jobs.cli import main
from spark_jobs.config.steps import recording
from spark_jobs.control.validation_results import read_results
from spark_jobs.experiments.jobs.experiment_metrics import METRICS_SCHEMA
from spark_jobs.experiments.validation.cases import CASES, RAMPS_AFTER_FIRST_PERIOD
from spark_jobs.experiments.validation.checks import RESET_METRICS
from spark_jobs.experiments.validation.run import ValidationFailed, validate_case, validate_day
from spark_jobs.experiments.validation.suites import CHECKS, DRIFT, MONOTONE, RESET
from spark_jobs.streaming.days import day_bounds_ms
from spark_jobs.streaming.lake.delta import read_arrow, table_exists

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.kafka, pytest.mark.e2e]

H = 3_600_000
SERIES = ["experiment_hash", "experiment_group", "period_start", "event_type"]


@pytest.fixture
def recomputed(recomputed_history_lake) -> HistoryLake:
    """The history with its batch recomputation, as the daily DAG leaves it before validating
    (each test copies it before writing)."""
    return recomputed_history_lake


def _checks(summary: dict) -> dict[str, dict]:
    return {check["check"]: check for check in summary["checks"]}


def _alerts(settings, run_url: str) -> pd.DataFrame:
    """The alerts of one run (the shared history may hold other tests' alerts)."""
    uri = settings.lake.table("alerts")
    if not table_exists(uri):
        return pd.DataFrame(columns=["run_url"])
    alerts = read_arrow(uri).to_pandas()
    return alerts[alerts.run_url == run_url]


def _results(settings, run_id: str) -> pd.DataFrame:
    results = read_results(settings)
    return results[results.run_id == run_id]


def test_clean_history_passes_every_check_of_every_case_and_day(recomputed, tmp_path):
    lake = copy_history(recomputed, tmp_path)
    url = lake.settings.airflow.run_url("daily_validation", "clean")
    summaries = [validate_day(lake.settings, day, "clean", url) for day in lake.days]

    assert all(s["success"] for s in summaries)
    evaluated = {
        (day, case, check["check"]): check["evaluated"]
        for day, s in zip(lake.days, summaries, strict=True)
        for case, c in s["cases"].items() for check in c["checks"]
    }
    day_2 = lake.days[1]
    assert all(evaluated[(day_2, case, check)] > 0 for case in CASES for check in (MONOTONE, DRIFT))
    # 4 re-ramps x 4 event types x every live metric (CUPED's sums look before the period)
    assert evaluated[(day_2, RAMPS_AFTER_FIRST_PERIOD, RESET)] == 4 * 4 * len(RESET_METRICS)
    drift = _checks(summaries[1]["cases"][RAMPS_AFTER_FIRST_PERIOD])[DRIFT]
    assert drift["max_drift"] == 0.0 and drift["worst"]["streaming"] == drift["worst"]["batch"]
    # on day 3 only the re-ramped groups still have windows
    assert evaluated[(lake.days[2], "single_ramp", DRIFT)] == 0

    results = _results(lake.settings, "clean")
    assert len(results) == len(lake.days) * len(CASES) * len(CHECKS)
    assert results.success.all() and (results.run_url == url).all()
    assert set(results.logical_date) == set(lake.days)
    assert Path(summaries[0]["data_docs"]).is_file()
    assert all(Path(page).is_file() for page in results.data_docs)
    assert _alerts(lake.settings, url).empty


def test_an_empty_lake_passes_with_nothing_evaluated(make_settings):
    settings = make_settings()
    with recording(seen := StepRecorder()):
        summary = validate_day(settings, datetime.date(2026, 1, 1), "empty")
    assert summary["success"]
    assert seen.steps == [*(f"checking case {case}" for case in CASES),
                          "writing Data Docs and results"]
    checks = [check for case in summary["cases"].values() for check in case["checks"]]
    assert len(checks) == 9 and all(check["evaluated"] == 0 for check in checks)
    assert all("no experiment group" in check["details"]["note"] for check in checks)
    assert len(read_results(settings)) == 9


def _corrupt(lake: HistoryLake, mutate: Callable[[pd.DataFrame], pd.DataFrame]) -> None:
    """Rewrite the streaming table (a copy) through delta-rs."""
    uri = lake.settings.lake.table("experiment_metrics")
    frame = mutate(read_arrow(uri).to_pandas())
    table = pa.Table.from_pandas(frame, schema=METRICS_SCHEMA, preserve_index=False)
    write_deltalake(uri, table, mode="overwrite")


def _series(frame: pd.DataFrame, experiment: str, group: str, event_type: str, nth_period: int):
    starts = sorted(frame.loc[frame.experiment_hash == experiment, "period_start"].unique())
    return (
        (frame.experiment_hash == experiment) & (frame.experiment_group == group)
        & (frame.period_start == starts[nth_period]) & (frame.event_type == event_type)
    )


def _failed_run(lake: HistoryLake, run_id: str) -> tuple[dict, pd.Series, pd.Series]:
    """Validate day 2 of the re-ramp case; return the summary, stored row and alert of the
    check that failed first in the order monotone, reset, drift."""
    url = lake.settings.airflow.run_url("daily_validation", run_id)
    with pytest.raises(ValidationFailed) as failed:
        validate_case(lake.settings, lake.days[1], RAMPS_AFTER_FIRST_PERIOD, run_id, url)
    summary = failed.value.summary
    results = _results(lake.settings, run_id).set_index("check")
    assert set(results.index) == set(CHECKS)
    for check in CHECKS:
        assert bool(results.loc[check, "success"]) is _checks(summary)[check]["success"]
    alerts = _alerts(lake.settings, url)
    failed_checks = [c for c in CHECKS if not _checks(summary)[c]["success"]]
    assert sorted(alerts.kind) == sorted(f"{c}_failed" for c in failed_checks)
    assert (alerts.source == "daily_validation").all()
    first = failed_checks[0]
    return summary, results.loc[first], alerts.set_index("kind").loc[f"{first}_failed"]


def test_a_decreasing_count_fails_the_monotone_check(recomputed, tmp_path):
    lake = copy_history(recomputed, tmp_path)
    after, _ = day_bounds_ms(lake.days[1])
    target = after + 3 * H

    def decrease(frame: pd.DataFrame) -> pd.DataFrame:
        series = _series(frame, "exp3_reramp", "treatment", "impression", 0)
        previous = frame.loc[series & (frame.window_end == target - H), "volume"].item()
        assert previous > 0
        frame.loc[series & (frame.window_end == target), "volume"] = previous - 1
        return frame

    _corrupt(lake, decrease)
    summary, stored, alert = _failed_run(lake, "decreasing")
    checks = _checks(summary)
    assert not checks[MONOTONE]["success"] and checks[MONOTONE]["unexpected"] == 1
    assert checks[RESET]["success"]
    assert not checks[DRIFT]["success"] and checks[DRIFT]["unexpected"] == 1
    worst = json.loads(stored.worst)
    assert (worst["experiment_group"], worst["window_end"], worst["metric"]) == (
        "treatment", target, "volume",
    )
    assert worst["previous_value"] - worst["value"] == 1
    assert (alert.experiment_hash, alert.experiment_group, alert.window_end, alert.metric) == (
        "exp3_reramp", "treatment", target, "volume",
    )
    assert alert.observed == worst["value"] and alert.threshold == worst["previous_value"]


def test_counts_carried_into_a_re_ramped_period_fail_the_reset_check(recomputed, tmp_path):
    lake = copy_history(recomputed, tmp_path)
    values = ["triggered_users", "volume", "propensity", "volume_sum_squares"]

    def carry_over(frame: pd.DataFrame) -> pd.DataFrame:
        for event_type in frame.event_type.unique():
            first = _series(frame, "exp3_reramp", "control", event_type, 0)
            last = frame.loc[first & (frame.window_end == frame.loc[first, "window_end"].max())]
            second = _series(frame, "exp3_reramp", "control", event_type, 1)
            frame.loc[second, values] += last[values].to_numpy()
        return frame

    _corrupt(lake, carry_over)
    summary, stored, alert = _failed_run(lake, "no_reset")
    checks = _checks(summary)
    assert checks[MONOTONE]["success"]  # the carried counts still grow
    assert not checks[RESET]["success"] and not checks[DRIFT]["success"]
    frame = read_arrow(lake.settings.lake.table("experiment_metrics")).to_pandas()
    second = _series(frame, "exp3_reramp", "control", "click", 1)
    first_window = frame.loc[second, "window_end"].min()
    worst = json.loads(stored.worst)
    assert (worst["experiment_hash"], worst["experiment_group"], worst["window_end"]) == (
        "exp3_reramp", "control", first_window,
    )
    assert worst["value"] > worst["raw_bound"]
    assert (alert.experiment_group, alert.window_end) == ("control", first_window)
    assert alert.observed == worst["value"] and alert.threshold == worst["raw_bound"]


def test_five_percent_drift_fails_the_drift_check_and_reports_the_largest(recomputed, tmp_path):
    lake = copy_history(recomputed, tmp_path)
    after, until = day_bounds_ms(lake.days[1])

    def inflate(frame: pd.DataFrame) -> pd.DataFrame:
        rows = (
            _series(frame, "exp3_reramp", "control", "impression", 0)
            & frame.window_end.between(after + 1, until) & (frame.volume >= 100)
        )
        assert rows.sum() >= 3
        frame.loc[rows, "volume"] = np.floor(frame.loc[rows, "volume"] * 1.05).astype("int64")
        return frame

    _corrupt(lake, inflate)
    summary, stored, alert = _failed_run(lake, "drift")
    checks = _checks(summary)
    assert checks[MONOTONE]["success"] and checks[RESET]["success"]
    drift = checks[DRIFT]
    assert not drift["success"] and drift["unexpected"] >= 3
    assert 0.04 < drift["max_drift"] <= 0.05
    assert stored.max_drift == drift["max_drift"]
    worst = json.loads(stored.worst)
    assert (worst["experiment_group"], worst["event_type"], worst["metric"]) == (
        "control", "impression", "volume",
    )
    assert worst["streaming"] > worst["batch"]
    assert (alert.experiment_hash, alert.window_end, alert.metric) == (
        "exp3_reramp", worst["window_end"], "volume",
    )
    assert alert.observed == drift["max_drift"]
    assert alert.threshold == lake.settings.validation.max_drift
    assert "drift" in alert.summary


def test_the_cli_validates_a_day_from_the_config_file(recomputed, tmp_path, monkeypatch, capsys):
    lake = copy_history(recomputed, tmp_path)
    monkeypatch.setenv("TIDELINE_CONFIG", str(lake.config_path))
    assert main(["validate", "--date", lake.days[1].isoformat(), "--run-id", "cli"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["success"] and printed["run_id"] == "cli"
    assert len(_results(lake.settings, "cli")) == len(CASES) * len(CHECKS)
    with pytest.raises(SystemExit) as bad:
        main(["validate", "--date", "2026-13-01"])
    assert bad.value.code == 2


def test_a_streaming_table_missing_its_newest_windows_fails_the_drift_check(recomputed,
                                                                             tmp_path):
    """A stalled job or lost rows: the horizon comes from the job's watermark, not from the
    table being checked, so a truncated table cannot shrink what is compared."""
    lake = copy_history(recomputed, tmp_path)
    after, _ = day_bounds_ms(lake.days[1])
    _corrupt(lake, lambda frame: frame[frame.window_end <= after + 6 * H])
    summary, _stored, _alert = _failed_run(lake, "truncated")
    drift = _checks(summary)[DRIFT]
    assert not drift["success"] and drift["max_drift"] == 1.0
    assert drift["details"]["rows_only_in_batch"] > 0
    assert drift["details"]["rows_only_in_streaming"] == 0


def test_a_primary_key_written_twice_fails_the_drift_check(recomputed, tmp_path):
    lake = copy_history(recomputed, tmp_path)
    after, until = day_bounds_ms(lake.days[1])

    def duplicate(frame: pd.DataFrame) -> pd.DataFrame:
        rows = _series(frame, "exp3_reramp", "control", "click", 0) & frame.window_end.between(
            after + 1, until)
        return pd.concat([frame, frame[rows].head(2)], ignore_index=True)

    _corrupt(lake, duplicate)
    summary, _stored, _alert = _failed_run(lake, "duplicated")
    drift = _checks(summary)[DRIFT]
    assert not drift["success"] and drift["details"]["duplicate_streaming_keys"] == 2
    assert any(row["metric"] == "duplicate_key" for row in drift["details"]["unexpected_sample"])


def test_a_day_is_ready_once_the_streaming_watermark_passed_it(history_lake, tmp_path):
    from spark_jobs.experiments.validation.readiness import day_closed

    lake = copy_history(history_lake, tmp_path)
    assert all(day_closed(lake.settings, day)[0] for day in lake.days)
    next_day = lake.days[-1] + datetime.timedelta(days=1)
    raw = lake.settings.lake.table("raw_events")
    late = read_arrow(raw).slice(0, 1).to_pandas()
    late["ts"] = day_bounds_ms(next_day)[0] + 5 * H
    write_deltalake(raw, pa.Table.from_pandas(late, schema=read_arrow(raw).schema,
                                              preserve_index=False), mode="append")
    ready, why = day_closed(lake.settings, next_day)
    assert not ready and "has not reached the end of" in why
    far_future = next_day + datetime.timedelta(days=30)
    assert day_closed(lake.settings, far_future)[0]  # no data from that day on
