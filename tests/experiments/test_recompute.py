"""The daily batch recomputation on real Spark and Delta: equal to the streaming table on every
closed window of three days of history, equal to the independent pandas reference on a small
random case, idempotent, and runnable as its own Spark application (spark-submit)."""

from __future__ import annotations

import dataclasses
import datetime
import json
import shutil

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import write_deltalake
from helpers.history import copy_history
from helpers.steps import StepRecorder
from reference.metrics_reference import experiment_metrics as reference_metrics

from spark_jobs.config.steps import recording
from spark_jobs.contracts.tables import TABLE_BATCH_METRICS
from spark_jobs.control.submit import RecomputeFailed, submit_recompute
from spark_jobs.experiments.admin.metadata import add_ramps
from spark_jobs.experiments.core.metrics import METRIC_COLUMNS
from spark_jobs.experiments.core.periods import RampRow
from spark_jobs.experiments.jobs.filter_activations import RAW_ACTIVATION_SCHEMA
from spark_jobs.experiments.jobs.filter_events import RAW_EVENT_SCHEMA
from spark_jobs.experiments.recompute.recompute import recompute_day
from spark_jobs.streaming.days import day_bounds_ms
from spark_jobs.streaming.lake.delta import read_arrow, table_exists, transaction_version

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.e2e]

KEY = ["experiment_hash", "experiment_group", "period_start", "event_type", "window_end"]
VALUES = ["is_control", "triggered_users", "volume", "propensity", "volume_sum_squares"]
ALL_VALUES = ["is_control", *METRIC_COLUMNS]  # streaming vs batch: every declared metric
DAY_1 = datetime.date(2026, 1, 1)


def _table(settings, name: str, values: list[str] = ALL_VALUES) -> pd.DataFrame:
    frame = read_arrow(settings.lake.table(name)).to_pandas()
    return frame[KEY + values].sort_values(KEY).reset_index(drop=True)


def _rows_per_day(frame: pd.DataFrame, days: list[datetime.date]) -> list[int]:
    return [
        int(frame.window_end.between(after + 1, until).sum())
        for after, until in map(day_bounds_ms, days)
    ]


@pytest.mark.kafka
def test_batch_equals_streaming_on_every_closed_window_of_three_days(recomputed_history_lake):
    lake = recomputed_history_lake
    streaming = _table(lake.settings, "experiment_metrics")
    batch = _table(lake.settings, TABLE_BATCH_METRICS)
    # the history closes every window of its three days, and nothing later
    assert sum(_rows_per_day(streaming, lake.days)) == len(streaming) > 1000
    assert all(count > 0 for count in _rows_per_day(batch, lake.days))
    periods = streaming.groupby(["experiment_hash", "experiment_group"]).period_start.nunique()
    assert periods.max() == 2, "the history must hold re-ramps after the first period"
    assert (streaming.volume_sum_squares > streaming.volume).any()
    pd.testing.assert_frame_equal(batch, streaming)


@pytest.mark.kafka
def test_a_rerun_replaces_the_day_instead_of_adding_to_it(
    spark, recomputed_history_lake, tmp_path
):
    lake = copy_history(recomputed_history_lake, tmp_path)
    day = lake.days[1]
    before = _table(lake.settings, TABLE_BATCH_METRICS)
    uri = lake.settings.lake.table(TABLE_BATCH_METRICS)
    # a row of a period that no longer exists (say, a ramp row since corrected) must go
    stale = read_arrow(uri).filter(pc.field("window_end") == day_bounds_ms(day)[1]).slice(0, 1)
    stale = stale.set_column(stale.schema.get_field_index("experiment_hash"),
                             "experiment_hash", pa.array(["exp_withdrawn"]))
    write_deltalake(uri, stale, mode="append")
    assert recompute_day(spark, lake.settings, day) == _rows_per_day(before, [day])[0]
    after = _table(lake.settings, TABLE_BATCH_METRICS)
    assert not after.duplicated(KEY).any()
    pd.testing.assert_frame_equal(after, before)
    uri = lake.settings.lake.table(TABLE_BATCH_METRICS)
    assert transaction_version(uri, f"batch_recompute@{day.isoformat()}") == 1


def _random_history(seed: int, start: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Raw events (critical, under the cap, with duplicates and events stamped exactly at an
    activation) and activations, in offset order."""
    rng = np.random.default_rng(seed)
    hour = 3_600_000
    types = ["impression", "click", "save", "search"]
    n = 120
    activations = pd.DataFrame({
        "user_id": rng.integers(1, 40, n),
        "experiment_hash": rng.choice(["exp_a", "exp_b"], n),
        "experiment_group": rng.choice(["control", "treatment"], n),
        "ts": start + rng.integers(0, 7 * hour, n),
    })
    users = rng.integers(1, 40, 600)
    events = pd.DataFrame({
        "user_id": users,
        "event_type": rng.choice(types, len(users)),
        "ts": start + rng.integers(0, 7 * hour, len(users)),
    })
    ties = activations[["user_id", "ts"]].assign(event_type=rng.choice(types, n))
    events = pd.concat([events, ties], ignore_index=True)
    events = pd.concat([events, events.sample(40, random_state=seed)], ignore_index=True)
    return events[["user_id", "event_type", "ts"]], activations


def _write_raw(settings, events: pd.DataFrame, activations: pd.DataFrame) -> None:
    """The raw tables as the filter jobs write them (topic coordinates included)."""
    def with_coordinates(frame: pd.DataFrame, topic: str) -> pd.DataFrame:
        return frame.assign(topic=topic, partition=0, offset=range(len(frame)), kafka_timestamp=0)

    write_deltalake(settings.lake.table("raw_events"), pa.Table.from_pandas(
        with_coordinates(events, "events"), schema=RAW_EVENT_SCHEMA, preserve_index=False))
    acts = activations.assign(group_ramp_time=0, is_control=False)  # batch uses the ramps
    write_deltalake(settings.lake.table("raw_activations"), pa.Table.from_pandas(
        with_coordinates(acts, "experiment_activations"), schema=RAW_ACTIVATION_SCHEMA,
        preserve_index=False))


def _messages(frame: pd.DataFrame) -> list[bytes]:
    return [json.dumps(row).encode() for row in frame.to_dict("records")]


def test_small_random_case_equals_the_pandas_reference(spark, make_settings):
    """Independent semantics: periods with a re-ramp, activations outside every period,
    events before first triggers, duplicates; compared on every window of the day, CUPED's
    sums included (a lookback of 50m: 3 whole windows)."""
    settings = make_settings(
        experiments={"period": "2h", "window": "20m", "cap_per_user_hour": 1000,
                     "pre_exposure": "50m"},
        spark={"master": "local[2]"},
    )
    start, end = day_bounds_ms(DAY_1)
    hour = 3_600_000
    ramps = [
        {"experiment_hash": "exp_a", "experiment_group": "control", "ramp_ts": start + hour,
         "allocation_pct": 10.0, "is_control": True},
        {"experiment_hash": "exp_a", "experiment_group": "treatment", "ramp_ts": start + hour,
         "allocation_pct": 10.0, "is_control": False},
        {"experiment_hash": "exp_b", "experiment_group": "treatment", "ramp_ts": start + 1_000,
         "allocation_pct": 5.0, "is_control": False},
        {"experiment_hash": "exp_b", "experiment_group": "treatment",
         "ramp_ts": start + 3 * hour + 7, "allocation_pct": 1.0, "is_control": False},
        {"experiment_hash": "exp_b", "experiment_group": "treatment",
         "ramp_ts": start + 4 * hour + 11, "allocation_pct": 20.0, "is_control": False},
    ]
    add_ramps(settings.metadata.url, [RampRow(**row) for row in ramps])
    events, activations = _random_history(5, start)
    _write_raw(settings, events, activations)

    count = recompute_day(spark, settings, DAY_1)

    expected = reference_metrics(
        _messages(events), _messages(activations), ramps, settings.experiments, end
    )[KEY + ALL_VALUES].sort_values(KEY).reset_index(drop=True)
    actual = _table(settings, TABLE_BATCH_METRICS)
    assert count == len(actual) == len(expected) > 100
    assert (expected.pre_volume_x_propensity > 0).any()
    assert expected.groupby("experiment_hash").period_start.nunique().to_dict() == {
        "exp_a": 1, "exp_b": 2,
    }
    pd.testing.assert_frame_equal(actual, expected.astype(actual.dtypes.to_dict()))


def test_a_lake_without_raw_data_recomputes_nothing(spark, make_settings):
    settings = make_settings(spark={"master": "local[2]"})
    start, _ = day_bounds_ms(DAY_1)
    add_ramps(settings.metadata.url, [RampRow("exp", "control", start + 5, 10.0, True)])
    with recording(seen := StepRecorder()):
        assert recompute_day(spark, settings, DAY_1) == 0
    assert seen.steps == ["planning (ramps, dead letters)", "computing the windows",
                          f"writing {TABLE_BATCH_METRICS}"]
    uri = settings.lake.table(TABLE_BATCH_METRICS)
    assert table_exists(uri) and read_arrow(uri).num_rows == 0
    empty = make_settings(spark={"master": "local[2]"})  # no ramps either
    assert recompute_day(spark, empty, DAY_1) == 0


@pytest.mark.kafka
def test_submitted_application_recomputes_the_day(history_lake, tmp_path, capfd):
    lake = copy_history(history_lake, tmp_path)
    shutil.rmtree(lake.settings.lake.table(TABLE_BATCH_METRICS), ignore_errors=True)
    day = lake.days[1]
    submit_recompute(lake.settings, day)
    assert "rows of 2026-01-02 into batch_experiment_metrics" in capfd.readouterr().out
    after, until = day_bounds_ms(day)
    streaming = _table(lake.settings, "experiment_metrics")
    expected = streaming[(streaming.window_end > after) & (streaming.window_end <= until)]
    batch = _table(lake.settings, TABLE_BATCH_METRICS)
    assert len(batch) > 0
    pd.testing.assert_frame_equal(batch, expected.reset_index(drop=True))


def test_a_failing_application_raises_with_its_log_tail(make_settings):
    settings = make_settings(spark={"master": "local[2]"})
    broken = dataclasses.replace(settings, raw={**settings.raw, "no_such_section": {"x": 1}})
    with pytest.raises(RecomputeFailed, match=r"(?s)exit 2.*unknown config section"):
        submit_recompute(broken, DAY_1)
