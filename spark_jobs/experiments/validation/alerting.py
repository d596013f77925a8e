"""The alert of a failed check: what failed, where (the worst row), by how much, the run link."""

from __future__ import annotations

import datetime

from spark_jobs.control.alerts import Alert
from spark_jobs.control.validation_results import CheckOutcome
from spark_jobs.experiments.validation.prepare import iso
from spark_jobs.experiments.validation.suites import DRIFT, MONOTONE
from spark_jobs.settings import Settings

ALERT_SOURCE = "daily_validation"


def failure_alert(
    settings: Settings, outcome: CheckOutcome, case: str, day: datetime.date, run_url: str | None
) -> Alert:
    """One alert per failed check, about its worst row (the largest violation)."""
    worst = outcome.worst or {}
    where = f"case {case}, {day.isoformat()}"
    if outcome.check == DRIFT:
        observed, threshold = worst.get("drift"), settings.validation.max_drift
        summary = (
            f"streaming vs batch drift up to {observed:.2%} (limit {threshold:.2%}) on "
            f"{outcome.unexpected} of {outcome.evaluated} values ({where}); worst: "
            f"streaming {worst.get('streaming')} vs batch {worst.get('batch')}"
        )
    elif outcome.check == MONOTONE:
        observed, threshold = worst.get("value"), worst.get("previous_value")
        summary = (
            f"{outcome.unexpected} of {outcome.evaluated} counts decreased from one window to "
            f"the next ({where}); worst: {threshold} -> {observed}"
        )
    else:
        observed, threshold = worst.get("value"), worst.get("raw_bound")
        summary = (
            f"{outcome.unexpected} of {outcome.evaluated} first-window counts of a re-ramped "
            f"period exceed what its raw data allows, counts did not restart from zero "
            f"({where}); worst: {observed} > {threshold}"
        )
    return Alert(
        source=ALERT_SOURCE,
        kind=f"{outcome.check}_failed",
        summary=summary,
        experiment_hash=worst.get("experiment_hash"),
        experiment_group=worst.get("experiment_group"),
        window_end_ms=worst.get("window_end"),
        metric=worst.get("metric"),
        observed=None if observed is None else float(observed),
        threshold=None if threshold is None else float(threshold),
        run_url=run_url,
        details={
            "case": case, "logical_date": day.isoformat(), "check": outcome.check,
            "event_type": worst.get("event_type"), "period_start": iso(worst.get("period_start")),
            "unexpected": outcome.unexpected, "evaluated": outcome.evaluated,
            "worst": worst, "data_docs": outcome.data_docs,
        },
    )
