"""The frames the three checks validate, prepared in pandas (no Spark, no Great Expectations).

Each check becomes "one row per thing that must hold", in long form (one row per metric),
so a single expectation covers every metric column (core/metrics.py) and every unexpected
row names its experiment, group, period, event type, window and metric:
- monotone: value >= previous_value, for consecutive windows of one period;
- reset after a re-ramp: value <= raw_bound, for the first window of a period that is not
  the group's first, where raw_bound is what the raw data inside [period start, window end)
  could give at most; a period that carried earlier counts over exceeds it (the live
  metrics only: CUPED's pre-exposure sums look before the period start by design);
- drift: streaming vs batch per closed window, `drift` = relative difference (missing = 1).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from spark_jobs.experiments.core.metrics import (
    EVENT_METRICS,
    LIVE_METRIC_COLUMNS,
    METRIC_COLUMNS,
    TRIGGERED_USERS,
)

GROUP = ["experiment_hash", "experiment_group"]
GROUP_PERIOD = [*GROUP, "period_start"]
SERIES = [*GROUP_PERIOD, "event_type"]
KEY = [*SERIES, "window_end"]
METRICS = list(METRIC_COLUMNS)
RESET_METRICS = list(LIVE_METRIC_COLUMNS)

MONOTONE_COLUMNS = [*KEY, "metric", "previous_window_end", "value", "previous_value"]
RESET_COLUMNS = [*KEY, "metric", "value", "raw_bound"]
DRIFT_COLUMNS = [*KEY, "metric", "streaming", "batch", "drift"]
MISSING_ROW_DRIFT = 1.0


def empty(columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series(dtype="object") for name in columns})


def in_groups(frame: pd.DataFrame, groups: list[tuple[str, str]]) -> pd.DataFrame:
    """Rows of the given (experiment_hash, experiment_group) pairs."""
    if frame.empty or not groups:
        return frame.iloc[0:0]
    wanted = pd.MultiIndex.from_tuples(groups, names=GROUP)
    return frame[pd.MultiIndex.from_frame(frame[GROUP]).isin(wanted)]


def _long(frame: pd.DataFrame, id_columns: list[str], pairs: dict[str, list[str]],
          metrics: list[str] = METRICS) -> pd.DataFrame:
    """One row per metric: `pairs` maps an output column to its per-metric source columns."""
    parts = []
    for index, metric in enumerate(metrics):
        part = frame[id_columns].copy()
        part.insert(len(KEY), "metric", metric)
        for out, sources in pairs.items():
            part[out] = frame[sources[index]].to_numpy()
        parts.append(part)
    return pd.concat(parts, ignore_index=True)


def monotone_pairs(metrics: pd.DataFrame, after_ms: int, until_ms: int) -> pd.DataFrame:
    """Each row with after < window_end <= until against the previous window of its series.

    `metrics` should also hold the window just before the day, so the first window of the
    day is compared with the last one of the day before.
    """
    if metrics.empty:
        return empty(MONOTONE_COLUMNS)
    ordered = metrics.sort_values(KEY, kind="mergesort").reset_index(drop=True)
    previous = ordered.groupby(SERIES, sort=False)[["window_end", *METRICS]].shift(1)
    ordered["previous_window_end"] = previous["window_end"]
    for name in METRICS:
        ordered[f"previous_{name}"] = previous[name]
    chosen = ordered[
        (ordered["window_end"] > after_ms)
        & (ordered["window_end"] <= until_ms)
        & ordered["previous_window_end"].notna()
    ]
    if chosen.empty:
        return empty(MONOTONE_COLUMNS)
    pairs = {"value": METRICS, "previous_value": [f"previous_{m}" for m in METRICS]}
    long = _long(chosen, [*KEY, "previous_window_end"], pairs)
    long["previous_window_end"] = long["previous_window_end"].astype("int64")
    long["previous_value"] = long["previous_value"].astype("int64")
    return long[MONOTONE_COLUMNS]


def first_windows(period_rows: pd.DataFrame, after_ms: int, until_ms: int) -> pd.DataFrame:
    """The rows of each period's first window, when that window ends in (after, until].

    `period_rows` must hold every row of the periods up to until (not just the day's), or a
    later window would pass for the first one.
    """
    if period_rows.empty:
        return period_rows
    first = period_rows.groupby(GROUP_PERIOD)["window_end"].transform("min")
    rows = period_rows[period_rows["window_end"] == first]
    return rows[(rows["window_end"] > after_ms) & (rows["window_end"] <= until_ms)]


def _inside_span(frame: pd.DataFrame) -> pd.Series:
    """period_start <= ts < window_end: the raw data a first window may have counted."""
    return (frame["ts"] >= frame["period_start"]) & (frame["ts"] < frame["window_end"])


def reset_bounds(
    first_rows: pd.DataFrame, raw_events: pd.DataFrame, raw_activations: pd.DataFrame
) -> pd.DataFrame:
    """First-window counts of re-ramped periods next to what the raw data allows at most.

    Within [s, W): triggered_users <= users with an activation of the group; a counted
    metric <= its `per_user` summed over all distinct events of those users (counted events
    are a subset: they also need ts >= the user's first trigger; `per_user` never decreases).
    """
    if first_rows.empty:
        return empty(RESET_COLUMNS)
    spans = first_rows[[*GROUP_PERIOD, "window_end"]].drop_duplicates()
    acts = raw_activations.merge(spans, on=GROUP)
    acts = acts[_inside_span(acts)]
    users = acts[[*GROUP_PERIOD, "window_end", "user_id"]].drop_duplicates()
    triggered = users.groupby(GROUP_PERIOD).size().rename(f"bound_{TRIGGERED_USERS}")

    events = raw_events.drop_duplicates(["user_id", "event_type", "ts"]).merge(users, on="user_id")
    events = events[_inside_span(events)]
    per_user = events.groupby([*SERIES, "user_id"]).size().rename("n").reset_index()
    counted = [f"bound_{metric.column}" for metric in EVENT_METRICS]
    for metric, bound in zip(EVENT_METRICS, counted, strict=True):
        per_user[bound] = np.asarray(metric.per_user(per_user["n"].to_numpy()), dtype="int64")
    event_bounds = per_user.groupby(SERIES)[counted].sum()
    rows = first_rows.merge(triggered, on=GROUP_PERIOD, how="left")
    rows = rows.merge(event_bounds, on=SERIES, how="left")
    bounds = [f"bound_{m}" for m in RESET_METRICS]
    rows[bounds] = rows[bounds].fillna(0).astype("int64")
    long = _long(rows, KEY, {"value": RESET_METRICS, "raw_bound": bounds}, RESET_METRICS)
    return long[RESET_COLUMNS]


def relative_drift(streaming: pd.Series, batch: pd.Series) -> pd.Series:
    """|streaming - batch| / |batch|; 0 when both are 0, 1 when only batch is 0 or a side is
    missing (a row the other side does not have is as wrong as a count can be)."""
    s = streaming.to_numpy(dtype="float64", na_value=np.nan)
    b = batch.to_numpy(dtype="float64", na_value=np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.abs(s - b) / np.abs(b)
    drift = np.where(b == 0, np.where(s == 0, 0.0, MISSING_ROW_DRIFT), ratio)
    drift = np.where(np.isnan(s) | np.isnan(b), MISSING_ROW_DRIFT, drift)
    return pd.Series(drift, index=streaming.index, dtype="float64")


def drift_rows(
    streaming: pd.DataFrame, batch: pd.DataFrame, after_ms: int, closed_until_ms: int
) -> pd.DataFrame:
    """Streaming against batch on every window with after < window_end <= closed_until."""
    def closed(frame: pd.DataFrame) -> pd.DataFrame:
        if frame.empty:
            return pd.DataFrame(columns=[*KEY, *METRICS])
        ends = frame["window_end"]
        return frame.loc[(ends > after_ms) & (ends <= closed_until_ms), [*KEY, *METRICS]]

    joined = closed(streaming).merge(
        closed(batch), on=KEY, how="outer", suffixes=("_streaming", "_batch")
    )
    if joined.empty:
        return empty(DRIFT_COLUMNS)
    pairs = {
        "streaming": [f"{m}_streaming" for m in METRICS],
        "batch": [f"{m}_batch" for m in METRICS],
    }
    long = _long(joined, KEY, pairs)
    long["streaming"] = long["streaming"].astype("float64")
    long["batch"] = long["batch"].astype("float64")
    long["drift"] = relative_drift(long["streaming"], long["batch"])
    duplicates = _duplicate_keys(closed(streaming))
    if duplicates.empty:
        return long[DRIFT_COLUMNS]
    return pd.concat([long[DRIFT_COLUMNS], duplicates], ignore_index=True)


def _duplicate_keys(streaming: pd.DataFrame) -> pd.DataFrame:
    """A primary key written twice (CONTRACTS s.5: never duplicated) is a failed row."""
    repeated = streaming.loc[streaming.duplicated(KEY), KEY].drop_duplicates()
    if repeated.empty:
        return empty(DRIFT_COLUMNS)
    return repeated.assign(metric="duplicate_key", streaming=np.nan, batch=np.nan,
                           drift=MISSING_ROW_DRIFT)[DRIFT_COLUMNS]


def plain(value: Any) -> Any:
    """A JSON-able Python value (numpy scalars to int/float, NaN to None)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and np.isnan(value):
        return None
    return value


def worst_row(frame: pd.DataFrame, severity: pd.Series) -> dict[str, Any] | None:
    """The row with the largest severity, as plain values, or None for an empty frame."""
    if frame.empty:
        return None
    index = severity.idxmax()
    row = {name: plain(value) for name, value in frame.loc[index].items()}
    row["severity"] = plain(severity.loc[index])
    return row
