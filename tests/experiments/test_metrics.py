"""The counted metrics' declarations (core/metrics.py): what each metric computes, and the rules
every declaration must follow for the streaming state, the batch recomputation and validation
to derive from it (a new metric gets these checks for free)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from spark_jobs.contracts.tables import EXPERIMENT_METRIC_COLUMNS, EXPERIMENT_METRICS
from spark_jobs.experiments.core.group_windows import MetricRow
from spark_jobs.experiments.core.metrics import (
    COUNT_COLUMNS,
    EVENT_METRICS,
    METRIC_COLUMNS,
    count_index,
    counts_of,
    window_counts,
)
from spark_jobs.experiments.processors.metrics_processor import METRIC_DELTA_SCHEMA
from spark_jobs.experiments.recompute.deltas import DELTA_COLUMNS

COUNTS = range(0, 60)
IDS = [metric.column for metric in EVENT_METRICS]


def test_the_declarations_are_the_tables_metric_columns_in_order():
    assert METRIC_COLUMNS == EXPERIMENT_METRIC_COLUMNS
    assert EXPERIMENT_METRICS.drop("updated_at").column_names[-len(METRIC_COLUMNS):] == (
        METRIC_COLUMNS)
    assert tuple(MetricRow.__dataclass_fields__)[-len(METRIC_COLUMNS):] == METRIC_COLUMNS
    for columns in (METRIC_DELTA_SCHEMA.fieldNames(), DELTA_COLUMNS):
        assert [c for c in columns if c in COUNT_COLUMNS] == list(COUNT_COLUMNS)


def test_each_metric_of_a_users_count():
    """CONTRACTS.md section 4, per user with c counted events of the type."""
    per_user = {metric.column: metric.per_user for metric in EVENT_METRICS}
    assert [per_user["volume"](c) for c in (0, 1, 3)] == [0, 1, 3]
    assert [int(per_user["propensity"](c)) for c in (0, 1, 3)] == [0, 1, 1]
    assert [per_user["volume_sum_squares"](c) for c in (0, 1, 3)] == [0, 1, 9]


def test_window_counts_are_the_growth_over_the_window():
    """A user going 0 -> 3 -> 5 events: volume 3 then 2, propensity once, squares 9 then 16."""
    def named(counts: tuple[int, ...]) -> dict[str, int]:
        return {c: counts[count_index(c)] for c in ("volume", "propensity", "volume_sum_squares")}

    assert named(window_counts(3, 3)) == {"volume": 3, "propensity": 1, "volume_sum_squares": 9}
    assert named(window_counts(2, 5)) == {"volume": 2, "propensity": 0, "volume_sum_squares": 16}


@pytest.mark.parametrize("metric", EVENT_METRICS, ids=IDS)
def test_a_metric_is_zero_without_events_and_never_decreases(metric):
    """Zero rows for users without events, monotone windows, and validation's raw bound (the
    counted events are a subset of the raw ones) all rely on this."""
    values = [metric.per_user(c) for c in COUNTS]
    assert values[0] == 0
    assert all(a <= b for a, b in itertools.pairwise(values))


@pytest.mark.parametrize("metric", EVENT_METRICS, ids=IDS)
def test_a_metric_gives_the_same_on_ints_and_arrays(metric):
    """Synthetic rows (numpy) and validation bounds (pandas) apply it to whole columns."""
    expected = [int(metric.per_user(c)) for c in COUNTS]
    counts = np.arange(len(COUNTS), dtype="int64")
    assert np.asarray(metric.per_user(counts), dtype="int64").tolist() == expected
    assert pd.Series(metric.per_user(pd.Series(counts))).astype("int64").tolist() == expected


def test_window_counts_add_up_to_the_users_total():
    """However a user's events split into windows, the growths sum to per_user(total)."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        split = rng.integers(1, 6, rng.integers(1, 8))
        running = np.cumsum(split)
        growths = [window_counts(int(n), int(c)) for n, c in zip(split, running, strict=True)]
        total = np.sum(growths, axis=0)
        assert total.tolist() == [int(m.per_user(int(running[-1]))) for m in EVENT_METRICS]


def test_counts_of_names_counted_columns_only():
    assert counts_of() == (0,) * len(EVENT_METRICS)
    with pytest.raises(KeyError, match="triggered_users"):
        counts_of(triggered_users=1)


@pytest.mark.spark
def test_the_spark_form_of_each_metric_equals_the_python_one(spark):
    """The batch recomputation applies `per_user` to Columns (deltas.window_growth)."""
    from pyspark.sql import functions as F

    from spark_jobs.experiments.recompute.deltas import window_growth

    pairs = [(n, running) for running in range(1, 40) for n in range(1, running + 1)]
    frame = spark.createDataFrame(pairs, "n long, running long")
    growth = frame.select("n", "running", *(
        window_growth(metric, F.col("n"), F.col("running")).alias(metric.column)
        for metric in EVENT_METRICS
    ))
    got = {(r.n, r.running): tuple(r[c] for c in COUNT_COLUMNS) for r in growth.collect()}
    assert got == {pair: window_counts(*pair) for pair in pairs}
