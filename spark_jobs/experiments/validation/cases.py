"""The seed's three validation cases, decided per (experiment, group) from the ramps table.

"By querying experiment metadata, we run the validation on experiments under 3 cases":
a single ramp-up, several ramp-ups inside the first aggregation period, and ramp-ups after
the first period (a re-ramp, whose second period must count from zero again). A group is
classified with the ramps up to the end of the validated day, so validating a past day
gives the same answer whenever it runs (a backfill does not see later ramps).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from spark_jobs.experiments.core.periods import GroupKey, Period, RampRow, periods, ramp_ups

SINGLE_RAMP = "single_ramp"
MULTI_RAMP_IN_FIRST_PERIOD = "multi_ramp_in_first_period"
RAMPS_AFTER_FIRST_PERIOD = "ramps_after_first_period"
CASES = (SINGLE_RAMP, MULTI_RAMP_IN_FIRST_PERIOD, RAMPS_AFTER_FIRST_PERIOD)


class UnknownCaseError(ValueError):
    """A case name that is not one of CASES."""


def check_case(case: str) -> str:
    if case not in CASES:
        raise UnknownCaseError(f"unknown validation case {case!r} (known: {', '.join(CASES)})")
    return case


def ramps_until(rows: Iterable[RampRow], until_ms: int) -> list[RampRow]:
    """The ramp rows already in effect before until_ms, in load order."""
    return [row for row in rows if row.ramp_ts < until_ms]


def classify_groups(rows: Iterable[RampRow], period_ms: int) -> dict[GroupKey, str]:
    """The case of every group with at least one ramp-up (groups never ramped up have none)."""
    rows = list(rows)
    by_group: dict[GroupKey, list[Period]] = defaultdict(list)
    for period in periods(rows, period_ms):
        by_group[period.group].append(period)
    ups: dict[GroupKey, list[int]] = defaultdict(list)
    for row in ramp_ups(rows):
        ups[row.group].append(row.ramp_ts)
    cases: dict[GroupKey, str] = {}
    for group, group_periods in by_group.items():
        first = group_periods[0]
        if len(group_periods) > 1:
            cases[group] = RAMPS_AFTER_FIRST_PERIOD
        elif sum(first.contains(ts) for ts in ups[group]) > 1:
            cases[group] = MULTI_RAMP_IN_FIRST_PERIOD
        else:
            cases[group] = SINGLE_RAMP
    return cases


def groups_of_case(
    rows: Iterable[RampRow], period_ms: int, until_ms: int, case: str
) -> list[GroupKey]:
    """The (experiment, group) pairs validated under `case` for a day ending at until_ms."""
    check_case(case)
    cases = classify_groups(ramps_until(rows, until_ms), period_ms)
    return sorted(group for group, found in cases.items() if found == case)


def later_periods(
    rows: Iterable[RampRow], period_ms: int, until_ms: int, groups: Iterable[GroupKey]
) -> list[Period]:
    """Periods of `groups` that are not their group's first: each must start from zero."""
    wanted = set(groups)
    seen: set[GroupKey] = set()
    result: list[Period] = []
    for period in periods(ramps_until(rows, until_ms), period_ms):  # by group, then start
        if period.group not in wanted:
            continue
        if period.group in seen:
            result.append(period)
        seen.add(period.group)
    return result
