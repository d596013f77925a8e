"""The dashboard's live statistics from provisional rows (pure: made-up frames, no lake): the
live look after the final ones, an experiment with provisional rows only, the rule that drops
a provisional look adding nothing, and the JSON that carries it under `live`."""

from __future__ import annotations

import pandas as pd
import pytest

from spark_jobs.results.dashboard.api import experiment_json, experiments_json
from spark_jobs.results.dashboard.live import live_histories
from spark_jobs.results.dashboard.results import (
    COLUMNS,
    NO_FINAL_WINDOW,
    Results,
    _final_histories,
    build_results,
)
from spark_jobs.results.synthetic_metrics import (
    KNOWN_EFFECTS,
    START_MS,
    metric_rows,
    provisional_rows,
)
from spark_jobs.settings import Settings, load_settings

HOUR = 3_600_000
WIN = KNOWN_EFFECTS[0]  # exp_win: click rate 0.20 -> 0.30


@pytest.fixture(scope="module")
def settings() -> Settings:
    return load_settings(environ={}, overrides={"experiments": {"period": "1d", "window": "1h"}})


def final(windows: int) -> pd.DataFrame:
    return metric_rows(WIN, HOUR, 1, windows=windows).to_pandas()[COLUMNS]


def provisional(windows: int, watermark: int | None) -> pd.DataFrame:
    return provisional_rows(WIN, HOUR, 1, windows, watermark).to_pandas()


def judged(settings: Settings, final_frame: pd.DataFrame, live_frame: pd.DataFrame) -> Results:
    return build_results(final_frame, [], settings, 3, live_frame, 7)


def test_the_live_look_follows_the_final_ones_in_the_first_open_window(settings):
    histories = _final_histories("exp_win", final(10), [])
    live, look_end = live_histories(histories, provisional(12, START_MS + 10 * HOUR), HOUR,
                                    24 * HOUR, lambda group, at: None)
    assert look_end == START_MS + 11 * HOUR  # window 11 is open, 12 too: the first one
    expected = provisional(12, None).set_index(["experiment_group", "event_type"])
    for history in live:
        ends = [end for end, _ in history.series["click"]]
        assert ends == [START_MS + k * HOUR for k in range(1, 12)]
        last = history.series["click"][-1][1]
        row = expected.loc[(history.group, "click")]
        assert (last.triggered_users, last.propensity) == (row.triggered_users, row.propensity)


@pytest.mark.parametrize(("windows", "watermark"), [
    (10, START_MS + 10 * HOUR),  # no record since the last final window
    (24, START_MS + 25 * HOUR),  # the period is over: the provisional row is the final one
])
def test_a_provisional_look_equal_to_the_latest_final_one_is_dropped(settings, windows,
                                                                       watermark):
    short = WIN.__class__(WIN.name, WIN.rates, windows=24)
    final_frame = metric_rows(short, HOUR, 1, windows=windows).to_pandas()[COLUMNS]
    live_frame = provisional_rows(short, HOUR, 1, windows, watermark).to_pandas()
    histories = _final_histories("exp_win", final_frame, [])
    assert live_histories(histories, live_frame, HOUR, 24 * HOUR, lambda g, at: None) is None
    result = judged(settings, final_frame, live_frame).find("exp_win")
    assert result.final and result.live is None
    assert experiments_json(judged(settings, final_frame, live_frame),
                            settings)["experiments"][0]["live"] is None


def test_one_changed_row_is_enough_for_a_live_look(settings):
    live_frame = provisional(10, START_MS + 10 * HOUR)
    live_frame.loc[0, "triggered_users"] += 1
    assert judged(settings, final(10), live_frame).find("exp_win").live is not None


def test_an_experiment_with_provisional_rows_only_has_live_results(settings):
    results = judged(settings, pd.DataFrame(columns=COLUMNS), provisional(3, None))
    (result,) = results.experiments
    assert (result.final, result.latest_window_end, result.running) == (False, None, True)
    assert (result.verdict.status, result.verdict.reason) == ("none", NO_FINAL_WINDOW)
    live = result.live
    assert (live.period_start, live.look_end, live.watermark) == (START_MS, START_MS + HOUR,
                                                                  None)
    assert live.verdict.looks == 1 and live.verdict.triggered_users == {
        "control": 450, "treatment": 450}
    listed = experiments_json(results, settings)
    assert (listed["as_of"], listed["table_version"], listed["live_version"]) == (None, 3, 7)
    assert listed["live_updated_at"] == live.updated_at_ms
    summary = listed["experiments"][0]
    assert (summary["final"], summary["status"], summary["looks"]) == (False, "none", 0)
    assert summary["live"]["provisional"] is True
    assert summary["live"]["triggered_users"] == {"control": 450, "treatment": 450}
    assert "verdict" not in summary["live"]  # the list stays small: no series


def test_the_detail_carries_the_live_part_under_its_own_key(settings):
    results = judged(settings, final(10), provisional(12, START_MS + 10 * HOUR))
    detail = experiment_json(results, results.find("exp_win"), settings)
    assert "live" not in detail["experiment"]  # the final part is what it was
    assert detail["experiment"]["verdict"]["looks"] == detail["looks"] == 10
    live = detail["live"]
    assert (live["status"], live["looks"], live["look_end"]) == ("win", 11,
                                                                 START_MS + 11 * HOUR)
    assert live["watermark"] == START_MS + 10 * HOUR
    click = next(m for m in live["verdict"]["metrics"]
                 if (m["event_type"], m["metric"]) == ("click", "propensity"))
    assert click["window_end"][-1] == START_MS + 11 * HOUR and click["significant"]
    assert live["triggered_users"]["control"] > detail["triggered_users"]["control"]


def test_a_new_period_on_the_provisional_side_starts_the_live_series_afresh(settings):
    next_period = provisional(2, None)
    next_period["period_start"] = START_MS + 24 * HOUR
    results = judged(settings, final(10), next_period)
    live = results.find("exp_win").live
    assert (live.period_start, live.look_end, live.verdict.looks) == (
        START_MS + 24 * HOUR, START_MS + 25 * HOUR, 1)


def test_a_new_provisional_version_keeps_the_final_verdicts_of_the_same_table_version(settings):
    first = judged(settings, final(10), provisional(11, START_MS + 10 * HOUR))
    again = build_results(final(10), [], settings, 3, provisional(12, START_MS + 10 * HOUR), 8,
                          previous=first)
    assert again.find("exp_win").verdict is first.find("exp_win").verdict
    assert again.find("exp_win").live.verdict.triggered_users["control"] == 12 * 150
    newer = build_results(final(11), [], settings, 4, provisional(12, None), 8, previous=first)
    assert newer.find("exp_win").verdict.looks == 11
