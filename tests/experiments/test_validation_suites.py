"""The GX suites in expectations/: they load, judge frames, and take max_drift at run time."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from spark_jobs.experiments.validation.checks import DRIFT_COLUMNS, MONOTONE_COLUMNS
from spark_jobs.experiments.validation.suites import (
    CHECKS,
    DRIFT,
    MONOTONE,
    SuiteError,
    SuiteRunner,
    load_suite,
)


@pytest.mark.parametrize("check", CHECKS)
def test_every_check_has_a_suite_file_that_loads(check):
    suite = load_suite(check)
    assert suite.name == check
    assert len(suite.expectations) >= 1


def test_a_suite_with_an_invalid_expectation_is_refused(tmp_path: Path):
    (tmp_path / "monotone_counts.json").write_text(json.dumps({
        "name": "monotone_counts",
        "expectations": [{"type": "expect_column_pair_values_a_to_be_greater_than_b",
                          "kwargs": {"column_A": "value"}}],  # column_B missing
    }))
    with pytest.raises(SuiteError, match="invalid"):
        load_suite(MONOTONE, tmp_path)
    with pytest.raises(SuiteError, match="no suite file"):
        load_suite(DRIFT, tmp_path)


def _drift_frame(drifts: list[float]) -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            "experiment_hash": "x", "experiment_group": "g", "period_start": 0,
            "event_type": "click", "window_end": range(len(drifts)), "metric": "volume",
            "streaming": 1.0, "batch": 1.0, "drift": drifts,
        }
    )
    return frame[DRIFT_COLUMNS]


def test_max_drift_is_a_run_time_parameter_and_unexpected_rows_are_named(tmp_path: Path):
    runner = SuiteRunner(str(tmp_path / "docs"), "2026-01-02_unit:run+1")
    frame = _drift_frame([0.0, 0.03, 0.01])
    strict = runner.run("single_ramp", DRIFT, frame, {"max_drift": 0.02})
    assert (strict.success, strict.evaluated, strict.unexpected) == (False, 3, 1)
    assert strict.unexpected_sample[0]["window_end"] in (1, "1")
    assert strict.unexpected_sample[0]["metric"] == "volume"
    lenient = runner.run("multi_ramp_in_first_period", DRIFT, frame, {"max_drift": 0.05})
    assert (lenient.success, lenient.unexpected) == (True, 0)
    index, pages = runner.build_docs()
    assert index is not None and Path(index).is_file()
    assert len(pages) == 2 and all(Path(page).is_file() for page in pages)
    assert "single_ramp" in pages[0] and "multi_ramp_in_first_period" in pages[1]


def test_an_empty_frame_passes_with_nothing_evaluated(tmp_path: Path):
    runner = SuiteRunner(str(tmp_path / "docs"), "empty")
    empty = pd.DataFrame({name: pd.Series(dtype="float64") for name in MONOTONE_COLUMNS})
    outcome = runner.run("single_ramp", MONOTONE, empty, {})
    assert (outcome.success, outcome.evaluated, outcome.unexpected) == (True, 0, 0)
