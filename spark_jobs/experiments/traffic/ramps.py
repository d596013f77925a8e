"""The experiments of the traffic and their `ramps` rows: one validation case each.

Experiment i follows case CASES[i % 4]; its ramps are placed relative to the traffic's
start so that every rule of CONTRACTS.md section 2 (periods, ramp-ups, re-ramps) occurs.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spark_jobs.contracts.tables import RAMPS_HEADER

if TYPE_CHECKING:
    from spark_jobs.experiments.traffic.spec import TrafficSpec

CONTROL = "control"
TREATMENT = "treatment"
GROUPS = (CONTROL, TREATMENT)

# Ramp schedules per validation case: group -> ((fraction of period after start, pct), ...)
# in load order. "single": one ramp-up (and a ramp-down); "multi": several ramp-ups inside
# the first period, a first row of 0 % and an equal row; "reramp": a ramp-up after the
# first period ended; "edge": a re-ramp exactly at the period end via two rows with equal
# ramp_ts (only load order makes it a ramp-up), treatment ramped later than control.
_SINGLE = ((0.10, 10), (1.60, 5))
_MULTI = ((0.0, 0), (0.20, 5), (0.45, 20), (0.70, 50), (0.85, 50))
_RERAMP = ((0.25, 10), (1.30, 5), (1.50, 30))
CASE_SCHEDULES: dict[str, dict[str, tuple[tuple[float, float], ...]]] = {
    "single": {CONTROL: _SINGLE, TREATMENT: _SINGLE},
    "multi": {CONTROL: _MULTI, TREATMENT: _MULTI},
    "reramp": {CONTROL: _RERAMP, TREATMENT: _RERAMP},
    "edge": {
        CONTROL: ((0.30, 10), (1.30, 5), (1.30, 8), (1.60, 40)),
        TREATMENT: ((0.35, 10), (1.35, 5), (1.35, 8), (1.65, 40)),
    },
}
CASES = tuple(CASE_SCHEDULES)


def ramp_rows(spec: TrafficSpec, cycles: int = 1) -> list[dict[str, Any]]:
    """Rows of the `ramps` table (RAMPS_HEADER keys, ramp_ts in ms) in load order.

    Cycle k repeats the schedule shifted by k * duration_ms (loop mode), preceded by a
    0 % row per group so its first row is a ramp-up again.
    """
    rows: list[dict[str, Any]] = []
    for cycle in range(cycles):
        base = spec.start_ms + cycle * spec.duration_ms
        for index, name in enumerate(spec.experiments):
            schedule = CASE_SCHEDULES[CASES[index % len(CASES)]]
            for group in GROUPS:
                steps = schedule[group]
                if cycle > 0 and steps[0][1] > 0:
                    steps = ((0.0, 0), *steps)
                for fraction, pct in steps:
                    ts = base + round(fraction * spec.period_ms)
                    rows.append(_ramp_row(name, group, ts, pct))
    return rows


def first_ramp_up_ms(spec: TrafficSpec) -> int:
    """Event time of the traffic's first ramp-up above 0 %: before it, no activation counts."""
    return min(row["ramp_ts"] for row in ramp_rows(spec) if row["allocation_pct"] > 0)


def _ramp_row(name: str, group: str, ts: int, pct: float) -> dict[str, Any]:
    values = (name, group, ts, pct, group == CONTROL)
    return dict(zip(RAMPS_HEADER, values, strict=True))


def write_ramps_csv(spec: TrafficSpec, path: str | Path, cycles: int = 1) -> Path:
    """Write the ramp rows as CSV (header RAMPS_HEADER, booleans as true/false)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(RAMPS_HEADER)
        for row in ramp_rows(spec, cycles):
            values = [row[name] for name in RAMPS_HEADER]
            values[-1] = "true" if values[-1] else "false"
            writer.writerow(values)
    return target
