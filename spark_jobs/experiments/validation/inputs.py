"""What the checks read from the lake: narrow, filtered reads through delta-rs into pandas.

Validation needs no Spark: one day of metric rows is small, and the raw data is only read
for the first window of re-ramped periods. A table that does not exist yet reads as empty,
so a fresh lake validates cleanly with nothing evaluated.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import pyarrow.compute as pc

from spark_jobs.contracts.tables import TABLE_EXPERIMENT_METRICS, TABLE_RAW_EVENTS
from spark_jobs.experiments.validation.checks import KEY, METRICS
from spark_jobs.settings import Settings
from spark_jobs.streaming.lake.delta import read_arrow, table_exists

METRIC_COLUMNS = [*KEY, "is_control", *METRICS]
RAW_EVENT_COLUMNS = ["user_id", "event_type", "ts"]
RAW_ACTIVATION_COLUMNS = ["user_id", "experiment_hash", "experiment_group", "ts"]


def _read(uri: str, columns: list[str], filters: list[tuple]) -> pd.DataFrame:
    if not table_exists(uri):
        return pd.DataFrame(columns=columns)
    return read_arrow(uri, columns=columns, filters=filters or None).to_pandas()


def metric_rows(
    uri: str, after_ms: int, until_ms: int, period_starts: Sequence[int] | None = None
) -> pd.DataFrame:
    """Rows with after < window_end <= until (optionally of some period starts only)."""
    filters: list[tuple] = [("window_end", ">", after_ms), ("window_end", "<=", until_ms)]
    if period_starts is not None:
        if not period_starts:
            return pd.DataFrame(columns=METRIC_COLUMNS)
        filters.append(("period_start", "in", sorted(set(period_starts))))
    return _read(uri, METRIC_COLUMNS, filters)


def streaming_watermark_ms(settings: Settings) -> int | None:
    """The metrics job's committed watermark, read from its checkpoint (not from its table:
    a stalled job or a truncated table must not move the horizon of what is checked)."""
    from spark_jobs.streaming.checkpoint import committed_watermark_ms

    checkpoint = settings.lake.checkpoint(TABLE_EXPERIMENT_METRICS)
    try:
        return committed_watermark_ms(checkpoint)
    except FileNotFoundError:
        return None


def latest_raw_ts(settings: Settings) -> int | None:
    """Event time of the newest accepted event, or None when there is none."""
    uri = settings.lake.table(TABLE_RAW_EVENTS)
    if not table_exists(uri):
        return None
    ts = read_arrow(uri, columns=["ts"])["ts"]
    return None if len(ts) == 0 else pc.max(ts).as_py()


def raw_rows(uri: str, columns: list[str], since_ms: int, until_ms: int) -> pd.DataFrame:
    """Raw records with since <= ts < until."""
    return _read(uri, columns, [("ts", ">=", since_ms), ("ts", "<", until_ms)])
