"""experiment_metrics resumes its running totals from the rows its own checkpoint lineage wrote:
after a checkpoint reset, the old lineage's newer rows must not be taken for the new one's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from spark_jobs.experiments.core.group_windows import GroupWindows, MetricRow
from spark_jobs.experiments.core.metrics import COVARIATE_COLUMNS, NO_COVARIATES, counts_of
from spark_jobs.experiments.core.user_metrics import Delta
from spark_jobs.experiments.jobs.experiment_metrics import (
    PRIMARY_KEY,
    commit_info,
    metrics_table,
    read_metric_rows,
)
from spark_jobs.experiments.jobs.provisional_table import LiveTable
from spark_jobs.settings import load_settings
from spark_jobs.streaming.lake.delta import compact, merge_once, read_arrow

pytestmark = pytest.mark.integration

W = 300_000
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _row(group: str, window_end: int, triggered: int) -> MetricRow:
    return MetricRow("x", group, 0, "click", window_end, group == "control", triggered,
                     triggered, triggered, triggered, *NO_COVARIATES)


def _write(uri: str, app_id: str, batch_id: int, rows: list[MetricRow], at: datetime) -> None:
    merge_once(uri, metrics_table(rows, at), PRIMARY_KEY, app_id, batch_id,
               commit_info(app_id, rows, at))


def test_a_lineage_resumes_from_its_own_newest_rows_not_the_tables(tmp_path):
    uri = str(tmp_path / "experiment_metrics")
    old, new = "experiment_metrics@old", "experiment_metrics@new"
    # the old lineage got to window 4 for groups a and b (and wrote b at window 2 too)
    for batch, window in enumerate((2, 3, 4)):
        _write(uri, old, batch, [_row("a", window * W, 10 * window),
                                 _row("b", window * W, 100 * window)], T0 + timedelta(batch))
    # after a reset, the new lineage replays: it only has group a, and gets to window 2
    _write(uri, new, 0, [_row("a", 1 * W, 1)], T0 + timedelta(days=10))
    _write(uri, new, 1, [_row("a", 2 * W, 2)], T0 + timedelta(days=11))
    compact(uri)  # a rewrite of the files keeps what tells the lineages apart

    assert read_metric_rows(uri, new) == [_row("a", 2 * W, 2)]
    assert read_metric_rows(uri, old) == [_row("a", 4 * W, 40), _row("b", 4 * W, 400)]
    assert read_metric_rows(uri, "experiment_metrics@never") == []


def test_a_table_of_an_older_release_resumes_and_gains_the_cuped_columns(tmp_path):
    """A table written before CUPED's columns existed: its rows resume with those sums at
    0, and the next upsert adds the columns (older rows keep them null)."""
    uri = str(tmp_path / "experiment_metrics")
    app = "experiment_metrics@q"
    rows = [_row("a", 1 * W, 5)]
    older = metrics_table(rows, T0).drop_columns(list(COVARIATE_COLUMNS))
    merge_once(uri, older, PRIMARY_KEY, app, 0, commit_info(app, rows, T0))
    resumed = read_metric_rows(uri, app)
    assert [r.pre_volume for r in resumed] == [None]
    windows = GroupWindows.resume(3 * W, W, ("click",), resumed)
    next_rows = windows.apply([Delta("x", "a", 0, False, "click", 2 * W, 0, counts_of(volume=1),
                                     (2, 4, 2, 2))], 2 * W)
    assert [(r.window_end, r.volume, r.pre_volume) for r in next_rows] == [(2 * W, 6, 2)]
    _write(uri, app, 1, next_rows, T0 + timedelta(1))
    table = read_arrow(uri).sort_by("window_end")
    assert table["pre_volume"].to_pylist() == [None, 2]
    assert table["pre_volume_x_propensity"].to_pylist() == [None, 2]


def test_no_table_means_nothing_to_resume(tmp_path):
    assert read_metric_rows(str(tmp_path / "none"), "experiment_metrics@q") == []


def test_live_totals_resume_from_their_rows_and_skip_a_batch_the_table_holds(tmp_path):
    """A crash after the provisional commit of batch 1 but before the marker's replays batch
    1: its deltas are in the resumed totals already and must not be folded again."""
    uri = str(tmp_path / "experiment_metrics_provisional")
    experiments = load_settings(environ={}, overrides={"experiments": {
        "period": "1h", "window": "5m", "critical_event_types": ["click", "save"]}}).experiments
    trig = Delta("x", "t", 0, False, None, None, 1)
    click = Delta("x", "t", 0, False, "click", None, 0, counts_of(volume=1, propensity=1,
                                                                 volume_sum_squares=1))
    first = LiveTable(uri, "experiment_metrics@q", experiments)
    assert first.commit([trig, click], 0, 0) and first.commit([click], 0, 1)
    assert not first.commit([], 0, 2)  # nothing changed: no commit
    compact(uri)

    restarted = LiveTable(uri, "experiment_metrics@q", experiments)
    assert not restarted.commit([click], 0, 1)  # the replay
    assert restarted.commit([click], 0, 2)
    rows = read_arrow(uri).to_pandas().set_index("event_type")
    assert rows.loc["click", ["triggered_users", "volume"]].tolist() == [1, 3]
    assert rows.loc["save", ["triggered_users", "volume"]].tolist() == [1, 0]
    assert LiveTable(uri, "experiment_metrics@other", experiments).commit([click], 0, 0)
    assert read_arrow(uri).to_pandas().set_index("event_type").loc["click", "volume"] == 1
