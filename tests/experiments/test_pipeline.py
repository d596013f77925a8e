"""End to end: generated traffic -> the three jobs (--available-now) -> experiment_metrics,
compared with an independent pandas recomputation of the same records; equal, not close.
(A SIGKILLed metrics job resuming with no loss and no duplicates, in its final and live
tables: tests/experiments/test_experiment_chaos.py.)
"""

from __future__ import annotations

import pandas as pd
import pytest
from helpers.jobs import run_available_now
from reference.metrics_reference import experiment_metrics as reference_metrics
from reference.metrics_reference import provisional_metrics

from spark_jobs.experiments.admin.metadata import add_ramps
from spark_jobs.experiments.admin.snapshot import publish_snapshot
from spark_jobs.experiments.core.periods import RampRow
from spark_jobs.experiments.core.tumbling_windows import period_last_window
from spark_jobs.experiments.traffic import MALFORMED, TrafficSpec, generate, produce
from spark_jobs.local.broker import EmbeddedBroker
from spark_jobs.settings import load_settings
from spark_jobs.streaming.checkpoint import batch_watermark_ms
from spark_jobs.streaming.lake.delta import read_arrow

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.kafka]

HOUR = 3_600_000
KEY = ["experiment_hash", "experiment_group", "period_start", "event_type", "window_end"]
VALUES = ["is_control", "triggered_users", "volume", "propensity", "volume_sum_squares"]
CUPED = ["pre_volume", "pre_volume_sum_squares", "pre_volume_x_volume",
         "pre_volume_x_propensity"]
CONFIG = {
    "experiments": {
        "period": "40m", "window": "5m", "lateness": "1m", "dedup_ttl": "1m",
        "cap_per_user_hour": 300, "pre_exposure": "12m",  # CUPED: 3 whole windows
    },
    # small triggers: many micro-batches, so watermarks advance between batches
    "jobs": {"max_records_per_trigger": 8000, "compact_every_batches": 5},
    "spark": {"master": "local[2]"},
}


def _final_watermark(settings, query) -> int:
    return batch_watermark_ms(settings.lake.checkpoint("experiment_metrics"),
                              query.lastProgress["batchId"])


def _metrics(settings) -> pd.DataFrame:
    table = read_arrow(settings.lake.table("experiment_metrics")).to_pandas()
    return table[KEY + VALUES + CUPED].sort_values(KEY).reset_index(drop=True)


@pytest.fixture(scope="module")
def pipeline(spark, tmp_path_factory):
    """Generate 3 hours of compressed traffic and run all three jobs once."""
    root = tmp_path_factory.mktemp("e2e")
    with EmbeddedBroker(port=0) as broker:
        overrides = {**CONFIG, "kafka": {"bootstrap": broker.bootstrap},
                     "lake": {"root": str(root / "lake")}}
        settings = load_settings(environ={}, overrides=overrides)
        spec = TrafficSpec.from_settings(
            settings.experiments, seed=11, duration_ms=3 * HOUR, n_users=300
        )
        records = list(generate(spec))
        produce(spec, settings, progress=False)
        ramps = spec.ramp_rows()
        add_ramps(settings.metadata.url, [RampRow(**row) for row in ramps])
        publish_snapshot(settings, spec.start_ms + spec.duration_ms, None)
        run_available_now(spark, settings, "filter_events", 600)
        run_available_now(spark, settings, "filter_activations", 600)
        query = run_available_now(spark, settings, "experiment_metrics", 600)
        yield {
            "settings": settings, "spec": spec, "records": records, "ramps": ramps,
            "watermark": _final_watermark(settings, query),
        }


def _expected(pipeline) -> pd.DataFrame:
    records = pipeline["records"]
    expected = reference_metrics(
        [r.value for r in records if r.topic == "events"],
        [r.value for r in records if r.topic == "experiment_activations"],
        pipeline["ramps"], pipeline["settings"].experiments, pipeline["watermark"],
    )
    return expected[KEY + VALUES + CUPED].sort_values(KEY).reset_index(drop=True)


def test_every_closed_window_equals_the_pandas_recomputation(pipeline):
    actual = _metrics(pipeline["settings"])
    expected = _expected(pipeline)
    assert len(expected) > 300, "the scenario must close many windows"
    assert expected.experiment_hash.nunique() >= 4
    # the three validation cases: re-ramps after a period start a second period
    periods = expected.groupby(["experiment_hash", "experiment_group"]).period_start.nunique()
    assert periods.max() >= 2
    assert (expected.volume > 0).any() and (expected.volume_sum_squares > expected.volume).any()
    assert (expected.pre_volume_x_volume > 0).any()
    pd.testing.assert_frame_equal(actual, expected.astype(actual.dtypes.to_dict()))


def test_malformed_messages_are_dead_lettered_and_nothing_is_late(pipeline):
    settings = pipeline["settings"]
    dead = read_arrow(settings.lake.table("dead_letters")).to_pandas()
    malformed = pd.Series(
        [r.topic for r in pipeline["records"] if r.kind == MALFORMED]
    ).value_counts()
    by_topic = dead[dead.reason != "late"].topic.value_counts()
    assert by_topic.to_dict() == malformed.to_dict()
    assert set(dead.reason) == {"malformed"}
    assert dead.detail.str.contains("not valid JSON").any()
    assert dead.detail.str.contains("missing field").any()
    assert dead.detail.str.contains("must be an integer").any()
    assert dead.detail.str.contains("null value").any()
    assert (dead.reason == "late").sum() == 0
    assert not dead.duplicated(["topic", "partition", "offset"]).any()


LIVE_KEY = ["experiment_hash", "experiment_group", "period_start", "event_type"]


def _expected_provisional(pipeline) -> pd.DataFrame:
    """The live totals of every accepted record (nothing is late here)."""
    records = pipeline["records"]
    return provisional_metrics(
        [r.value for r in records if r.topic == "events"],
        [r.value for r in records if r.topic == "experiment_activations"],
        pipeline["ramps"], pipeline["settings"].experiments, pipeline["watermark"])


def _live(settings) -> pd.DataFrame:
    table = read_arrow(settings.lake.table("experiment_metrics_provisional")).to_pandas()
    return table[LIVE_KEY + VALUES].sort_values(LIVE_KEY).reset_index(drop=True)


def test_provisional_rows_hold_every_record_and_end_as_the_final_rows(pipeline):
    settings = pipeline["settings"]
    table = read_arrow(settings.lake.table("experiment_metrics_provisional")).to_pandas()
    assert (table.watermark <= pipeline["watermark"]).all()
    live = _live(settings)
    expected = _expected_provisional(pipeline)
    pd.testing.assert_frame_equal(live, expected.astype(live.dtypes.to_dict()))
    # a period whose last window is final: its live row is that window's final row
    cfg = settings.experiments
    final = _metrics(settings)
    last = period_last_window(final.period_start, cfg.period_ms, cfg.window_ms)
    final = final[final.window_end == last].drop(columns=["window_end", *CUPED])
    assert len(final) > 0
    closed = live.merge(final[LIVE_KEY], on=LIVE_KEY)
    pd.testing.assert_frame_equal(closed, final.reset_index(drop=True))
