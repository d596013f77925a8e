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
METRIC_COLUMNS = (TRIGGERED_USERS, *COUNT_COLUMNS)  # the table's metric columns, in order
NO_COUNTS = (0,) * len(EVENT_METRICS)
_PER_USER = tuple(metric.per_user for metric in EVENT_METRICS)
_INDEX = {column: index for index, column in enumerate(COUNT_COLUMNS)}

if METRIC_COLUMNS != EXPERIMENT_METRIC_COLUMNS:
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


def counts_of(**named: int) -> tuple[int, ...]:
    """Counts in EVENT_METRICS order from column names (others 0), for hand-made deltas."""
    unknown = set(named) - set(COUNT_COLUMNS)
    if unknown:
        raise KeyError(f"not counted metrics: {sorted(unknown)} (known: {COUNT_COLUMNS})")
    return tuple(named.get(column, 0) for column in COUNT_COLUMNS)


def count_index(column: str) -> int:
    """Position of a counted metric's column in every counts tuple."""
    return _INDEX[column]
