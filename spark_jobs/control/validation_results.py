"""The `validation_results` Delta table: one row per (run, logical date, case, check).

Rows are upserted on that key, so retrying an Airflow task replaces its rows, while a
backfill or a new run adds its own. Concurrent case tasks may write at the same time, so
writes go through the lake's conflict-retrying upsert.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pyarrow as pa

from spark_jobs.contracts.tables import TABLE_VALIDATION_RESULTS, VALIDATION_RESULTS
from spark_jobs.settings import Settings
from spark_jobs.streaming.lake.delta import read_arrow, table_exists, upsert_rows

RESULT_KEY = VALIDATION_RESULTS.primary_key
RESULTS_SCHEMA = VALIDATION_RESULTS.arrow_schema()


@dataclass
class CheckOutcome:
    """The verdict of one check on one case and day, ready to store and report."""

    check: str
    success: bool
    evaluated: int
    unexpected: int
    max_drift: float | None = None
    worst: dict[str, Any] | None = None
    details: dict[str, Any] = field(default_factory=dict)
    data_docs: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "check": self.check, "success": self.success, "evaluated": self.evaluated,
            "unexpected": self.unexpected, "max_drift": self.max_drift, "worst": self.worst,
            "details": self.details, "data_docs": self.data_docs,
        }


def results_table(
    outcomes: list[CheckOutcome], run_id: str, day: datetime.date, case: str,
    run_url: str | None, validated_at: datetime.datetime,
) -> pa.Table:
    rows = [
        {
            "run_id": run_id, "logical_date": day, "case": case, "check": o.check,
            "success": o.success, "evaluated": o.evaluated, "unexpected": o.unexpected,
            "max_drift": o.max_drift,
            "worst": None if o.worst is None else json.dumps(o.worst, sort_keys=True),
            "details": json.dumps(o.details, sort_keys=True), "data_docs": o.data_docs,
            "run_url": run_url, "validated_at": validated_at,
        }
        for o in outcomes
    ]
    return pa.Table.from_pylist(rows, schema=RESULTS_SCHEMA)


def store_results(
    settings: Settings, outcomes: list[CheckOutcome], run_id: str, day: datetime.date,
    case: str, run_url: str | None,
) -> None:
    """Upsert one row per check of this (run, day, case)."""
    table = results_table(outcomes, run_id, day, case, run_url, datetime.datetime.now(datetime.UTC))
    upsert_rows(settings.lake.table(TABLE_VALIDATION_RESULTS), table, RESULT_KEY)


def read_results(settings: Settings) -> pd.DataFrame:
    """Every stored result (empty, with the columns, before the first validation)."""
    uri = settings.lake.table(TABLE_VALIDATION_RESULTS)
    table = read_arrow(uri) if table_exists(uri) else RESULTS_SCHEMA.empty_table()
    return table.to_pandas()
