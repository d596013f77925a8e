"""Entry points of the daily validation: `validate_case` (one Airflow task per case) and
`validate_day` (all cases, the CLI's `tideline validate`).

For one case and day: pick the case's groups from the ramps, prepare the three frames
(checks.py), judge them with the GX suites (suites.py), store one row per check
(results.py), render Data Docs, alert on every failed check, and finally raise
ValidationFailed so the task goes red. Nothing to validate is a pass with 0 rows evaluated.
"""

from __future__ import annotations

import datetime
from typing import Any

from spark_jobs.config.steps import step
from spark_jobs.control.alerts import send_alert
from spark_jobs.control.validation_results import CheckOutcome, store_results
from spark_jobs.experiments.validation.alerting import failure_alert
from spark_jobs.experiments.validation.cases import CASES
from spark_jobs.experiments.validation.checks import worst_row
from spark_jobs.experiments.validation.prepare import PREPARERS, PreparedCheck, case_scope
from spark_jobs.experiments.validation.suites import DRIFT, SuiteRunner
from spark_jobs.settings import Settings


class ValidationFailed(RuntimeError):
    """At least one check failed; raised after results, Data Docs and alerts are out."""

    def __init__(self, summary: dict[str, Any]) -> None:
        self.summary = summary
        failed = [
            f"{case}/{check['check']}"
            for case, checks in _checks_by_case(summary).items()
            for check in checks
            if not check["success"]
        ]
        super().__init__(
            f"validation of {summary['logical_date']} failed: {', '.join(failed)} "
            f"(data docs: {summary.get('data_docs')})"
        )


def _checks_by_case(summary: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    if "cases" in summary:
        return {case: s["checks"] for case, s in summary["cases"].items()}
    return {summary["case"]: summary["checks"]}


def _judge(runner: SuiteRunner, case: str, prepared: PreparedCheck) -> CheckOutcome:
    outcome = runner.run(case, prepared.check, prepared.frame, prepared.parameters)
    worst = worst_row(prepared.frame, prepared.severity)
    details = {**prepared.details, "unexpected_sample": outcome.unexpected_sample}
    return CheckOutcome(
        check=prepared.check,
        success=outcome.success,
        evaluated=outcome.evaluated,
        unexpected=outcome.unexpected,
        max_drift=worst["drift"] if prepared.check == DRIFT and worst else None,
        worst=worst,
        details=details,
    )


def _run_case(
    settings: Settings, runner: SuiteRunner, day: datetime.date, case: str
) -> tuple[list[str], list[CheckOutcome]]:
    """The case's groups (as `experiment/group`) and the verdict of each check."""
    step(f"checking case {case}")
    scope = case_scope(settings, day, case)
    outcomes = [_judge(runner, case, prepare(settings, scope)) for prepare in PREPARERS]
    return scope.base_details()["groups"], outcomes


def _finish(
    settings: Settings, runner: SuiteRunner, day: datetime.date, run_id: str,
    run_url: str | None, cases: dict[str, list[CheckOutcome]],
) -> str | None:
    """Docs first (rows link to pages), then rows, then alerts for what failed."""
    step("writing Data Docs and results")
    index, pages = runner.build_docs()
    outcomes = [o for case in cases.values() for o in case]
    for outcome, page in zip(outcomes, pages, strict=True):
        outcome.data_docs = page
    for case, case_outcomes in cases.items():
        store_results(settings, case_outcomes, run_id, day, case, run_url)
    for case, case_outcomes in cases.items():
        for outcome in case_outcomes:
            if not outcome.success:
                send_alert(settings, failure_alert(settings, outcome, case, day, run_url))
    return index


def _case_summary(case: str, groups: list[str], outcomes: list[CheckOutcome]) -> dict[str, Any]:
    return {
        "case": case,
        "success": all(o.success for o in outcomes),
        "groups": groups,
        "checks": [o.to_json() for o in outcomes],
    }


def validate_case(
    settings: Settings, day: datetime.date, case: str, run_id: str, run_url: str | None = None
) -> dict[str, Any]:
    """Run the three checks of one case on one day; raise ValidationFailed if any failed."""
    runner = SuiteRunner(settings.validation.data_docs, f"{day.isoformat()}_{run_id}")
    groups, outcomes = _run_case(settings, runner, day, case)
    index = _finish(settings, runner, day, run_id, run_url, {case: outcomes})
    summary = {
        "logical_date": day.isoformat(), "run_id": run_id, "run_url": run_url,
        "data_docs": index, **_case_summary(case, groups, outcomes),
    }
    if not summary["success"]:
        raise ValidationFailed(summary)
    return summary


def validate_day(
    settings: Settings, day: datetime.date, run_id: str, run_url: str | None = None
) -> dict[str, Any]:
    """All three cases of one day (results of every case stored before any failure)."""
    runner = SuiteRunner(settings.validation.data_docs, f"{day.isoformat()}_{run_id}")
    found = {case: _run_case(settings, runner, day, case) for case in CASES}
    index = _finish(
        settings, runner, day, run_id, run_url, {case: o for case, (_, o) in found.items()}
    )
    cases = {case: _case_summary(case, groups, o) for case, (groups, o) in found.items()}
    summary = {
        "logical_date": day.isoformat(), "run_id": run_id, "run_url": run_url,
        "data_docs": index, "success": all(c["success"] for c in cases.values()),
        "cases": cases,
    }
    if not summary["success"]:
        raise ValidationFailed(summary)
    return summary
