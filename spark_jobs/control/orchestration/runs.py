"""What a DAG run means for Tideline: the day it validates, the time it publishes as of, the
link that alerts and results point to. Shared by the DAG files so they stay declarations.

Airflow 3 gives runs of three kinds: scheduled and backfill runs carry a data interval;
manual runs from the UI carry a logical date (the moment of the click) and the last complete
interval before it; runs triggered through the API without a logical date carry neither,
only `run_after`. Every helper here gives a well-defined answer for all three.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from spark_jobs.settings import ConfigError, Settings

UTC = datetime.UTC
DAY = datetime.timedelta(days=1)
# Start of the DAGs that never catch up: any past date works, this one is the project's epoch.
EPOCH = datetime.datetime(2026, 1, 1, tzinfo=UTC)
DAY_PARAM = "day"


def validation_start(settings: Settings) -> datetime.datetime:
    """First logical date of `daily_validation` (midnight UTC of validation.start_date).

    There is deliberately no built-in default: with catchup on, a guessed date in the past
    would start hundreds of runs. `tideline platform` sets it (see spark_jobs.local.platform_stack).
    """
    if settings.validation.start_date is None:
        raise ConfigError(
            "validation.start_date is not set: set TIDELINE_VALIDATION__START_DATE (or "
            "validation.start_date in $TIDELINE_CONFIG) to the first day to validate, e.g. "
            "2026-01-01; `tideline platform` sets it to the day before its first start"
        )
    day = datetime.date.fromisoformat(settings.validation.start_date)
    return datetime.datetime.combine(day, datetime.time(), tzinfo=UTC)


def _utc(moment: datetime.datetime) -> datetime.datetime:
    return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)


def run_after(context: Mapping[str, Any]) -> datetime.datetime:
    """When the run was due (every run has one)."""
    return _utc(context["dag_run"].run_after)


def run_day(context: Mapping[str, Any]) -> datetime.date:
    """The day a daily run covers.

    In order: the `day` param (a person re-validating a chosen day from the trigger form);
    the start of the run's data interval (scheduled and backfill runs: the logical date;
    manual UI runs: the last complete day before the click); else the day before run_after.
    """
    chosen = (context.get("params") or {}).get(DAY_PARAM)
    if chosen:
        try:
            return datetime.date.fromisoformat(str(chosen))
        except ValueError:
            message = f"param {DAY_PARAM!r} must be a date like 2026-01-01, got {chosen!r}"
            raise ValueError(message) from None
    start = context.get("data_interval_start")
    if start is not None:
        return _utc(start).date()
    return run_after(context).date() - DAY


def as_of_ms(context: Mapping[str, Any]) -> int:
    """The moment a run publishes as of: its data interval's end, else run_after."""
    end = context.get("data_interval_end")
    moment = _utc(end) if end is not None else run_after(context)
    return int(moment.timestamp() * 1000)


def schedule_every(interval_ms: int) -> str | datetime.timedelta:
    """The schedule of a DAG run every `interval_ms`: a cron on the clock's round minutes or
    hours when the interval divides the hour or the day, else the interval itself."""
    minute, hour = 60_000, 3_600_000
    if interval_ms % minute == 0 and 60 % (interval_ms // minute) == 0:
        step = interval_ms // minute
        return "* * * * *" if step == 1 else f"*/{step} * * * *"
    if interval_ms % hour == 0 and 24 % (interval_ms // hour) == 0:
        step = interval_ms // hour
        return f"0 */{step} * * *" if step < 24 else "0 0 * * *"
    return datetime.timedelta(milliseconds=interval_ms)


def run_url(settings: Settings, context: Mapping[str, Any]) -> str:
    """Link to this run in the Airflow UI."""
    return settings.airflow.run_url(context["dag_run"].dag_id, context["run_id"])
