"""Independent pandas recomputation of `experiment_metrics` (CONTRACTS.md sections 3-5).

Written from the contract text alone: it shares no code with spark_jobs (no domain module,
no record specs, no period logic), so agreement between the streaming result and this
recomputation is evidence rather than a tautology. Input is the raw messages of the two
input topics in production (offset) order, the ramp rows and the experiment settings;
output is the exact table every closed window must hold.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd

HOUR_MS = 3_600_000
GROUP = ["experiment_hash", "experiment_group", "period_start"]
PRIMARY_KEY = [*GROUP, "event_type", "window_end"]
COUNTED = ["triggered_users", "volume", "propensity", "volume_sum_squares"]
# CUPED (issue 17): Σx, Σx², Σx·volume, Σx·[volume > 0], x = a triggered user's clean events
# of the type in the pre-exposure lookback (whole windows) before their first trigger's window
CUPED = ["pre_volume", "pre_volume_sum_squares", "pre_volume_x_volume",
         "pre_volume_x_propensity"]
VALUES = [*COUNTED, *CUPED]
COLUMNS = [*PRIMARY_KEY, "is_control", *VALUES]

_EVENT_FIELDS = (("user_id", int), ("event_type", str), ("ts", int))
_ACTIVATION_FIELDS = (
    ("user_id", int),
    ("experiment_hash", str),
    ("experiment_group", str),
    ("ts", int),
)


@dataclass(frozen=True)
class ReferenceSettings:
    """The experiment settings the metrics depend on (lookback is always 'all' here)."""

    period_ms: int
    window_ms: int
    cap_per_user_hour: int
    critical_event_types: tuple[str, ...]
    pre_exposure_ms: int = 0  # CUPED's lookback (0: the CUPED columns are zeros)

    @classmethod
    def of(cls, settings: Any) -> ReferenceSettings:
        """Read the settings from any object or mapping that has them (the lookback may be
        absent)."""
        if isinstance(settings, cls):
            return settings
        if isinstance(settings, Mapping):
            get = settings.get
        else:
            def get(name: str) -> Any:
                return getattr(settings, name, None)
        return cls(
            period_ms=int(get("period_ms")),
            window_ms=int(get("window_ms")),
            cap_per_user_hour=int(get("cap_per_user_hour")),
            critical_event_types=tuple(get("critical_event_types")),
            pre_exposure_ms=int(get("pre_exposure_ms") or 0),
        )


@dataclass
class ReferenceResult:
    """The metrics table plus counts of what each step dropped (for diagnosing mismatches)."""

    metrics: pd.DataFrame
    clean_events: pd.DataFrame
    first_triggers: pd.DataFrame
    periods: pd.DataFrame
    stats: dict[str, int] = field(default_factory=dict)


# ---------------------------------------------------------------- inputs


def split_topics(
    records: Iterable[Any],
    events_topic: str = "events",
    activations_topic: str = "experiment_activations",
) -> tuple[list[bytes | None], list[bytes | None]]:
    """Values of each input topic in production order, from objects with .topic and .value."""
    events: list[bytes | None] = []
    activations: list[bytes | None] = []
    for record in records:
        if record.topic == events_topic:
            events.append(record.value)
        elif record.topic == activations_topic:
            activations.append(record.value)
    return events, activations


def _values(messages: Any) -> list[Any]:
    """Message values in order from a DataFrame (column value), values or (value, key) pairs."""
    if isinstance(messages, pd.DataFrame):
        return messages["value"].tolist()
    out = []
    for message in messages:
        if hasattr(message, "value"):
            out.append(message.value)
        elif isinstance(message, tuple):
            out.append(message[0])
        else:
            out.append(message)
    return out


def _decode(value: Any, fields: tuple[tuple[str, type], ...]) -> tuple | None:
    """The fields of one JSON object message, or None when it is malformed (section 2)."""
    if value is None:
        return None
    try:
        obj = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    out = []
    for name, kind in fields:
        item = obj.get(name)
        if type(item) is not kind:  # excludes bool for int, float for int, None
            return None
        if kind is int and not -(2**63) <= item < 2**63:
            return None
        out.append(item)
    return tuple(out)


def decode_messages(messages: Any, topic: str) -> tuple[pd.DataFrame, int]:
    """Well-formed records of `events` or `experiment_activations` (with their order) and
    the number of malformed messages."""
    fields = _EVENT_FIELDS if topic == "events" else _ACTIVATION_FIELDS
    names = [name for name, _ in fields]
    rows = []
    bad = 0
    for value in _values(messages):
        decoded = _decode(value, fields)
        if decoded is None:
            bad += 1
        else:
            rows.append(decoded)
    frame = pd.DataFrame.from_records(rows, columns=names)
    for name, kind in fields:
        frame[name] = frame[name].astype("int64" if kind is int else object)
    return frame, bad


# ---------------------------------------------------------------- events


def clean_events(events: pd.DataFrame, cfg: ReferenceSettings) -> tuple[pd.DataFrame, dict]:
    """Critical types, then the hourly per-user cap in offset order, then first-wins dedup."""
    critical = events[events["event_type"].isin(cfg.critical_event_types)]
    hour = critical["ts"] // HOUR_MS
    rank = critical.groupby([critical["user_id"], hour], sort=False).cumcount()
    capped = critical[rank < cfg.cap_per_user_hour]
    clean = capped.drop_duplicates(["user_id", "event_type", "ts"], keep="first")
    stats = {
        "events_non_critical": len(events) - len(critical),
        "events_over_cap": len(critical) - len(capped),
        "events_duplicate": len(capped) - len(clean),
        "events_clean": len(clean),
    }
    return clean.reset_index(drop=True), stats


# ---------------------------------------------------------------- ramps and periods


def read_ramps_csv(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a ramps CSV (header experiment_hash,experiment_group,ramp_ts,...) in file order."""
    with Path(path).open(newline="") as handle:
        return list(csv.DictReader(handle))


def _as_bool(value: Any) -> bool:
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("true", "t", "1", "yes"):
            return True
        if text in ("false", "f", "0", "no", ""):
            return False
        raise ValueError(f"not a boolean: {value!r}")
    return bool(value)


def _ramp_table(ramps: Any) -> list[tuple[str, str, int, float, bool]]:
    """Ramp rows in load order as typed tuples, from rows, a DataFrame or a CSV path."""
    if isinstance(ramps, str | Path):
        ramps = read_ramps_csv(ramps)
    if isinstance(ramps, pd.DataFrame):
        ramps = ramps.to_dict("records")
    return [
        (
            str(row["experiment_hash"]),
            str(row["experiment_group"]),
            int(row["ramp_ts"]),
            float(row["allocation_pct"]),
            _as_bool(row["is_control"]),
        )
        for row in ramps
    ]


def periods_of(ramps: Any, period_ms: int) -> pd.DataFrame:
    """Aggregation periods (section 3): a ramp-up is a row whose pct exceeds the previous
    row's of the group (ramp_ts order, ties in load order; first compares with 0); it starts
    [r, r + period) unless r lies in the group's current period."""
    by_group: dict[tuple[str, str], list[tuple[int, int, float, bool]]] = {}
    for order, (exp, group, ts, pct, control) in enumerate(_ramp_table(ramps)):
        by_group.setdefault((exp, group), []).append((ts, order, pct, control))
    rows = []
    for (exp, group), changes in by_group.items():
        previous = 0.0
        current_start: int | None = None
        for ts, _order, pct, control in sorted(changes):
            if pct > previous and (current_start is None or ts >= current_start + period_ms):
                current_start = ts
                rows.append((exp, group, ts, control))
            previous = pct
    frame = pd.DataFrame(rows, columns=[*GROUP, "is_control"])
    frame["period_start"] = frame["period_start"].astype("int64")
    frame["is_control"] = frame["is_control"].astype(bool)
    return frame


# ---------------------------------------------------------------- activations


def first_triggers(
    activations: pd.DataFrame, periods: pd.DataFrame, period_ms: int
) -> tuple[pd.DataFrame, dict]:
    """first_trigger per (x, g, period, user): smallest ts of the user's activations that lie
    in that period; activations outside every period do not count."""
    joined = activations.merge(periods, on=["experiment_hash", "experiment_group"])
    inside = joined[
        (joined["ts"] >= joined["period_start"])
        & (joined["ts"] < joined["period_start"] + period_ms)
    ]
    keys = [*GROUP, "is_control", "user_id"]
    triggers = inside.groupby(keys, as_index=False)["ts"].min()
    triggers = triggers.rename(columns={"ts": "first_trigger"})
    stats = {
        "activations_in_periods": len(inside),
        "activations_outside_periods": len(activations) - len(inside),
        "first_triggers": len(triggers),
    }
    return triggers, stats


# ---------------------------------------------------------------- windows


def _window_end_of(ts: pd.Series | np.ndarray, window_ms: int):
    """End of the window holding ts: the smallest multiple of window strictly above ts."""
    return (ts // window_ms + 1) * window_ms


def window_grid(
    triggers: pd.DataFrame, cfg: ReferenceSettings, closed_until_ms: int | None
) -> pd.DataFrame:
    """Every expected (x, g, s, is_control, W): contiguous from the window holding the
    group's first trigger in the period up to min(last closed window, period's last)."""
    first = triggers.groupby([*GROUP, "is_control"], as_index=False)["first_trigger"].min()
    w0 = _window_end_of(first["first_trigger"].to_numpy(), cfg.window_ms)
    period_end = first["period_start"].to_numpy() + cfg.period_ms
    last = -(-period_end // cfg.window_ms) * cfg.window_ms
    if closed_until_ms is not None:
        last = np.minimum(last, closed_until_ms // cfg.window_ms * cfg.window_ms)
    count = np.maximum((last - w0) // cfg.window_ms + 1, 0)
    rep = np.repeat(np.arange(len(first)), count)
    step = np.arange(len(rep)) - np.repeat(np.cumsum(count) - count, count)
    grid = first.drop(columns="first_trigger").iloc[rep].reset_index(drop=True)
    grid["window_end"] = (w0[rep] + step * cfg.window_ms).astype("int64")
    return grid


def _user_increments(
    clean: pd.DataFrame, triggers: pd.DataFrame, pre: pd.DataFrame, cfg: ReferenceSettings
) -> pd.DataFrame:
    """Per (x, g, s, k, W): how volume, propensity and sum of squares grow at window W.

    A counted event (first_trigger <= ts < period end) first counts in the window holding
    ts; a user's count c goes up by n there, so the sum of squares grows by c^2 - (c-n)^2,
    Σx·volume by x·n and Σx·[volume > 0] by x at the user's first counted window.
    """
    joined = clean.merge(triggers[[*GROUP, "user_id", "first_trigger"]], on="user_id", how="inner")
    counted = joined[
        (joined["ts"] >= joined["first_trigger"])
        & (joined["ts"] < joined["period_start"] + cfg.period_ms)
    ].copy()
    counted["window_end"] = _window_end_of(counted["ts"], cfg.window_ms)
    user_keys = [*GROUP, "event_type", "user_id"]
    per = counted.groupby([*user_keys, "window_end"]).size().rename("n").reset_index()
    running = per.groupby(user_keys)["n"].cumsum()
    per["sq"] = running * running - (running - per["n"]) ** 2
    per["first"] = (per.groupby(user_keys).cumcount() == 0).astype("int64")
    per = per.merge(pre, on=[*GROUP, "user_id", "event_type"], how="left")
    per["x"] = per["x"].fillna(0).astype("int64")
    per["xn"] = per["x"] * per["n"]
    per["xfirst"] = per["x"] * per["first"]
    return per.groupby(PRIMARY_KEY, as_index=False).agg(
        volume=("n", "sum"), propensity=("first", "sum"), volume_sum_squares=("sq", "sum"),
        pre_volume_x_volume=("xn", "sum"), pre_volume_x_propensity=("xfirst", "sum"),
    )


def _pre_exposure(
    clean: pd.DataFrame, triggers: pd.DataFrame, cfg: ReferenceSettings
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """x per (x, g, s, user, k), and Σx, Σx² per (x, g, s, k, W of the first trigger).

    The lookback, rounded up to whole windows, ends where the first trigger's window starts.
    """
    windows = -(-cfg.pre_exposure_ms // cfg.window_ms)
    joined = clean.merge(triggers[[*GROUP, "user_id", "first_trigger"]], on="user_id")
    trigger_window_start = _window_end_of(joined["first_trigger"], cfg.window_ms) - cfg.window_ms
    inside = (joined["ts"] < trigger_window_start) & (
        joined["ts"] >= trigger_window_start - windows * cfg.window_ms)
    x = (joined[inside].groupby([*GROUP, "user_id", "event_type"]).size().rename("x")
         .reset_index())
    at = x.merge(triggers[[*GROUP, "user_id", "first_trigger"]], on=[*GROUP, "user_id"])
    at["window_end"] = _window_end_of(at["first_trigger"], cfg.window_ms)
    at["x2"] = at["x"] * at["x"]
    sums = at.groupby(PRIMARY_KEY, as_index=False).agg(
        pre_volume=("x", "sum"), pre_volume_sum_squares=("x2", "sum"))
    return x, sums


def window_metrics(
    clean: pd.DataFrame,
    triggers: pd.DataFrame,
    cfg: ReferenceSettings,
    closed_until_ms: int | None,
) -> pd.DataFrame:
    """The metrics table: cumulative values per expected window, zeros where nothing yet."""
    grid = window_grid(triggers, cfg, closed_until_ms)
    types = pd.DataFrame({"event_type": list(cfg.critical_event_types)})
    table = grid.merge(types, how="cross")
    trig = triggers.assign(window_end=_window_end_of(triggers["first_trigger"], cfg.window_ms))
    trig = trig.groupby([*GROUP, "window_end"]).size().rename("triggered_users").reset_index()
    table = table.merge(trig, on=[*GROUP, "window_end"], how="left")
    pre, pre_sums = _pre_exposure(clean, triggers, cfg)
    table = table.merge(_user_increments(clean, triggers, pre, cfg), on=PRIMARY_KEY, how="left")
    table = table.merge(pre_sums, on=PRIMARY_KEY, how="left")
    table[VALUES] = table[VALUES].fillna(0).astype("int64")
    table = table.sort_values(PRIMARY_KEY, kind="mergesort").reset_index(drop=True)
    table[VALUES] = table.groupby([*GROUP, "event_type"])[VALUES].cumsum()
    table["is_control"] = table["is_control"].astype(bool)
    for name in ("period_start", "window_end", *VALUES):
        table[name] = table[name].astype("int64")
    return table[COLUMNS]


# ---------------------------------------------------------------- entry points


def recompute(
    events: Any,
    activations: Any,
    ramps: Any,
    settings: Any,
    closed_until_ms: int | None,
) -> ReferenceResult:
    """The whole recomputation, with intermediate tables and drop counts.

    events / activations: message values of each topic in offset order (bytes or None), as
    a list, (value, key) pairs, objects with .value, or a DataFrame with a `value` column.
    ramps: ramp rows (RAMPS_HEADER keys), a DataFrame or a CSV path. settings: anything with
    period_ms, window_ms, cap_per_user_hour, critical_event_types. closed_until_ms: the
    final watermark (None: every window up to each period's end).
    """
    cfg = ReferenceSettings.of(settings)
    event_frame, bad_events = decode_messages(events, "events")
    activation_frame, bad_activations = decode_messages(activations, "experiment_activations")
    clean, event_stats = clean_events(event_frame, cfg)
    periods = periods_of(ramps, cfg.period_ms)
    triggers, trigger_stats = first_triggers(activation_frame, periods, cfg.period_ms)
    metrics = window_metrics(clean, triggers, cfg, closed_until_ms)
    stats = {
        "events_malformed": bad_events,
        "activations_malformed": bad_activations,
        **event_stats,
        **trigger_stats,
        "rows": len(metrics),
    }
    return ReferenceResult(metrics, clean, triggers, periods, stats)


def experiment_metrics(
    events: Any,
    activations: Any,
    ramps: Any,
    settings: Any,
    closed_until_ms: int | None,
) -> pd.DataFrame:
    """Just the expected `experiment_metrics` rows, sorted by the primary key."""
    return recompute(events, activations, ramps, settings, closed_until_ms).metrics


LIVE_KEY = [*GROUP, "event_type"]


def provisional_metrics(
    events: Any, activations: Any, ramps: Any, settings: Any, closed_until_ms: int | None
) -> pd.DataFrame:
    """The expected `experiment_metrics_provisional` rows when nothing is late: per group
    period the users with a first trigger, per type the sums over c = a triggered user's
    clean events with first_trigger <= ts < period end, windows still open included."""
    cfg = ReferenceSettings.of(settings)
    result = recompute(events, activations, ramps, cfg, closed_until_ms)
    joined = result.clean_events.merge(result.first_triggers, on="user_id")
    counted = joined[(joined.ts >= joined.first_trigger)
                     & (joined.ts < joined.period_start + cfg.period_ms)]
    c = counted.groupby([*LIVE_KEY, "user_id"]).size().rename("volume").reset_index()
    c = c.assign(propensity=1, volume_sum_squares=c.volume ** 2)
    sums = c.groupby(LIVE_KEY, as_index=False)[COUNTED[1:]].sum()
    triggered = result.first_triggers.groupby([*GROUP, "is_control"]).size()
    grid = triggered.rename("triggered_users").reset_index().merge(
        pd.DataFrame({"event_type": list(cfg.critical_event_types)}), how="cross")
    table = grid.merge(sums, on=LIVE_KEY, how="left").fillna(0)
    return table[[*LIVE_KEY, "is_control", *COUNTED]].sort_values(LIVE_KEY).reset_index(
        drop=True)


def from_records(
    records: Sequence[Any], ramps: Any, settings: Any, closed_until_ms: int | None
) -> ReferenceResult:
    """Recompute from generated records (objects with .topic and .value) in production order."""
    events, activations = split_topics(records)
    return recompute(events, activations, ramps, settings, closed_until_ms)
