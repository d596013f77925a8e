"""Great Expectations: the suites in `expectations/`, run on the prepared pandas frames.

Suites are JSON files loaded at run time, so a reviewer reads and changes the rules there;
thresholds are suite parameters (`{"$PARAMETER": "max_drift"}`) filled in from settings.
Every run is stored (see docs.py) and can be rendered as Data Docs.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import great_expectations as gx
import pandas as pd
from great_expectations.core.run_identifier import RunIdentifier
from great_expectations.data_context.types.resource_identifiers import (
    ExpectationSuiteIdentifier,
    ValidationResultIdentifier,
)

from spark_jobs.experiments.validation.checks import KEY, plain
from spark_jobs.experiments.validation.docs import (
    SITE_NAME,
    context_config,
    docs_folder,
    safe_name,
    url_to_path,
)

EXPECTATIONS_DIR = Path(__file__).resolve().parents[3] / "expectations"
MONOTONE = "monotone_counts"
RESET = "reset_after_reramp"
DRIFT = "streaming_batch_drift"
CHECKS = (MONOTONE, RESET, DRIFT)
DATASOURCE = "tideline"
UNEXPECTED_SAMPLE = 20
RESULT_FORMAT = {
    "result_format": "SUMMARY",
    "partial_unexpected_count": UNEXPECTED_SAMPLE,
    "unexpected_index_column_names": [*KEY, "metric"],
}


class SuiteError(RuntimeError):
    """A suite file that cannot be used, or an expectation that raised instead of judging."""


def load_suite(check: str, folder: Path = EXPECTATIONS_DIR) -> gx.ExpectationSuite:
    """The suite `<folder>/<check>.json`; every expectation in it must load (GX only logs)."""
    path = folder / f"{check}.json"
    try:
        spec = json.loads(path.read_text())
    except FileNotFoundError:
        raise SuiteError(f"no suite file {path}") from None
    except json.JSONDecodeError as exc:
        raise SuiteError(f"{path}: not valid JSON: {exc}") from None
    if spec.get("name") != check:
        raise SuiteError(f"{path}: suite name must be {check!r}, got {spec.get('name')!r}")
    try:
        suite = gx.ExpectationSuite(**spec)
    except Exception as exc:  # pydantic, GX and type errors all mean "this file is wrong"
        raise SuiteError(f"{path}: invalid suite: {exc}") from exc
    if len(suite.expectations) != len(spec.get("expectations", [])) or not suite.expectations:
        raise SuiteError(f"{path}: some expectations are invalid or missing (see the GX log)")
    return suite


@dataclass
class SuiteOutcome:
    """What one suite said about one frame."""

    success: bool
    evaluated: int
    unexpected: int
    unexpected_sample: list[dict[str, Any]] = field(default_factory=list)
    data_docs: str | None = None


class SuiteRunner:
    """One ephemeral GX context per validation run; every (case, check) is one asset."""

    def __init__(self, data_docs: str, run_name: str) -> None:
        self.context = gx.get_context(
            mode="ephemeral", project_config=context_config(docs_folder(data_docs))
        )
        self.source = self.context.data_sources.add_pandas(DATASOURCE)
        self.run_id = RunIdentifier(
            run_name=safe_name(run_name), run_time=datetime.datetime.now(datetime.UTC)
        )
        self._suites: dict[str, gx.ExpectationSuite] = {}
        self._results: list[ValidationResultIdentifier] = []

    def _suite(self, check: str) -> gx.ExpectationSuite:
        if check not in self._suites:
            self._suites[check] = self.context.suites.add(load_suite(check))
        return self._suites[check]

    def run(
        self, case: str, check: str, frame: pd.DataFrame, parameters: dict[str, Any]
    ) -> SuiteOutcome:
        """Validate `frame` with the check's suite; the result is stored for Data Docs."""
        name = f"{case}.{check}"
        batch = self.source.add_dataframe_asset(name).add_batch_definition_whole_dataframe("day")
        definition = self.context.validation_definitions.add(
            gx.ValidationDefinition(name=name, data=batch, suite=self._suite(check))
        )
        result = definition.run(
            batch_parameters={"dataframe": frame}, expectation_parameters=parameters,
            run_id=self.run_id, result_format=RESULT_FORMAT,
        )
        self._results.append(
            ValidationResultIdentifier(
                ExpectationSuiteIdentifier(check), self.run_id, f"{DATASOURCE}-{name}"
            )
        )
        evaluated = unexpected = 0
        sample: list[dict[str, Any]] = []
        for item in result.results:
            if item.exception_info.get("raised_exception"):
                raise SuiteError(
                    f"{name}: {item.expectation_config.type} raised: "
                    f"{item.exception_info.get('exception_message')}"
                )
            evaluated = max(evaluated, int(item.result.get("element_count") or 0))
            unexpected += int(item.result.get("unexpected_count") or 0)
            sample += [
                {name: plain(value) for name, value in row.items()}
                for row in item.result.get("partial_unexpected_index_list") or []
            ]
        return SuiteOutcome(bool(result.success), evaluated, unexpected, sample[:UNEXPECTED_SAMPLE])

    def build_docs(self) -> tuple[str | None, list[str | None]]:
        """Render this run's pages and the index (which lists every stored run); returns the
        index path and the page of each validation, in run order."""
        suites = [ExpectationSuiteIdentifier(check) for check in self._suites]
        index = self.context.build_data_docs(
            site_names=[SITE_NAME], resource_identifiers=[*suites, *self._results]
        )[SITE_NAME]
        pages = [
            url_to_path(self.context.get_docs_sites_urls(resource_identifier=ident)[0]["site_url"])
            for ident in self._results
        ]
        return url_to_path(index), pages
