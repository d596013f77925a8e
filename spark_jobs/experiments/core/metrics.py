"""The counted metrics of experiment_metrics (CONTRACTS.md section 4), each declared once.

Every counted metric is a sum over the users of a group period of `per_user(c)`, where c is
the user's number of counted events of the event type so far (volume: c; propensity: c > 0;
volume_sum_squares: c * c). That one function is all the pipeline needs:
- the streaming per-user state and the batch recomputation both add, per user and window,
  `per_user(running) - per_user(running - n)` (n = the user's counted events of the type in
  the window, running = their count after it), so the two halves cannot disagree;
- validation bounds a first window by `per_user(n)` of the raw events (`per_user` never
  decreases, and counted events are a subset of them).
So `per_user` must give 0 for 0, never decrease, and use only arithmetic and comparisons:
it is called with ints, numpy/pandas arrays and Spark Columns (a comparison is cast to 0/1).
`triggered_users` is not one of them: it counts users, not events.

CUPED (issue 17): beside them, the sums a variance-reduced comparison needs
(results/cuped.py), with x = the user's pre-exposure volume of the event type (their clean
events of that type in the `experiments.pre_exposure` before the window of their first
trigger, whole windows; core/pre_exposure.py):
- `pre_volume` = Σx and `pre_volume_sum_squares` = Σx², over triggered users: each user adds
  x and x² in the window of their first trigger, where x is final (any event before that
  window arriving later is behind the watermark);
- `pre_volume_x_<metric>` = Σ x·per_user(c) for the metrics in CROSSED_METRICS: a user adds x
  times the metric's growth wherever the metric grows.
These are COVARIATE_COLUMNS; they are in experiment_metrics only (the live table has no
CUPED: x is not final while the trigger window is open).

Adding a metric: name its column in `contracts/tables.EXPERIMENT_METRIC_COLUMNS`, declare it
in EVENT_METRICS below (same order) and give an example of it in
tests/experiments/test_metrics.py. The per-user state, the job's delta and table rows, the
batch recomputation, the validation checks and the synthetic rows follow from these
declarations, and the generic tests check the rules above and that streaming equals batch on
it. An existing table needs the column added before the job writes to it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from spark_jobs.contracts.tables import EXPERIMENT_METRIC_COLUMNS
from spark_jobs.contracts.tables import LIVE_METRIC_COLUMNS as TABLES_LIVE_METRIC_COLUMNS


@dataclass(frozen=True)
class EventMetric:
    """A column of experiment_metrics that sums `per_user` of each user's event count."""

    column: str
    per_user: Callable[[Any], Any]


EVENT_METRICS = (
    EventMetric("volume", lambda count: count),
    EventMetric("propensity", lambda count: count > 0),
    EventMetric("volume_sum_squares", lambda count: count * count),
)

TRIGGERED_USERS = "triggered_users"
COUNT_COLUMNS = tuple(metric.column for metric in EVENT_METRICS)
PRE_EXPOSURE = "pre_volume"  # Σx
CROSSED_METRICS = ("volume", "propensity")  # the metrics y with a Σxy column
COVARIATE_COLUMNS = (
    PRE_EXPOSURE, f"{PRE_EXPOSURE}_sum_squares",
    *(f"{PRE_EXPOSURE}_x_{column}" for column in CROSSED_METRICS),
)
LIVE_METRIC_COLUMNS = (TRIGGERED_USERS, *COUNT_COLUMNS)  # experiment_metrics_provisional's
METRIC_COLUMNS = (*LIVE_METRIC_COLUMNS, *COVARIATE_COLUMNS)  # experiment_metrics', in order
NO_COUNTS = (0,) * len(EVENT_METRICS)
NO_COVARIATES = (0,) * len(COVARIATE_COLUMNS)
_PER_USER = tuple(metric.per_user for metric in EVENT_METRICS)
_INDEX = {column: index for index, column in enumerate(COUNT_COLUMNS)}
_CROSSED = tuple(_INDEX[column] for column in CROSSED_METRICS)

if (METRIC_COLUMNS, LIVE_METRIC_COLUMNS) != (EXPERIMENT_METRIC_COLUMNS,
                                             TABLES_LIVE_METRIC_COLUMNS):
    raise RuntimeError(
        f"experiment_metrics declares the metric columns {EXPERIMENT_METRIC_COLUMNS} but "
        f"experiments/core/metrics.py computes {METRIC_COLUMNS}: declare each counted column "
        f"once in both, in the same order"
    )


@lru_cache(maxsize=1 << 14)
def window_counts(n: int, running: int) -> tuple[int, ...]:
    """What a user whose count went from running - n to running adds to each counted metric.

    Called once per user, event type and window by the streaming state, so it is on the job's
    hot path; the same small (n, running) pairs recur, hence the cache.
    """
    before = running - n
    return tuple([per_user(running) - per_user(before) for per_user in _PER_USER])


@lru_cache(maxsize=1 << 14)
def crossed_counts(pre: int, counts: tuple[int, ...]) -> tuple[int, ...]:
    """The covariate sums' growth where a user with pre-exposure volume `pre` grows the
    counted metrics by `counts` (window_counts): x times each crossed metric's growth."""
    if not pre:
        return NO_COVARIATES
    return (0, 0, *(pre * counts[index] for index in _CROSSED))


def pre_exposure_counts(pre: int) -> tuple[int, ...]:
    """What a newly triggered user with pre-exposure volume `pre` adds to the covariate sums."""
    return (pre, pre * pre, *(0 for _ in CROSSED_METRICS))


def counts_of(**named: int) -> tuple[int, ...]:
    """Counts in EVENT_METRICS order from column names (others 0), for hand-made deltas."""
    unknown = set(named) - set(COUNT_COLUMNS)
    if unknown:
        raise KeyError(f"not counted metrics: {sorted(unknown)} (known: {COUNT_COLUMNS})")
    return tuple(named.get(column, 0) for column in COUNT_COLUMNS)


def count_index(column: str) -> int:
    """Position of a counted metric's column in every counts tuple."""
    return _INDEX[column]
