"""Which jobs read an available-now remainder in one plan (kafka/source.py read_topic): the
stateful queries of several topics, after whose last batch Spark runs one without data that
commits the watermark; fraud_rules keeps the aligned batches (its driver mode is a
stateless query: no such batch, and its watermark moves only between batches)."""

from __future__ import annotations

from typing import Any

import pytest

from spark_jobs.experiments.jobs import experiment_metrics
from spark_jobs.fraud.jobs import fraud_rules
from spark_jobs.samples.jobs import training_samples
from spark_jobs.settings import load_settings


class Built(Exception):
    """Raised by the stand-in source: the job's plan is not needed past it."""


@pytest.mark.parametrize(("module", "one_plan"), [
    (training_samples, True), (experiment_metrics, True), (fraud_rules, False)])
def test_the_stateful_jobs_read_an_available_now_remainder_in_one_plan(
        monkeypatch: pytest.MonkeyPatch, module: Any, one_plan: bool) -> None:
    asked: dict[str, Any] = {}

    def read_topic(*args: Any, **kwargs: Any) -> None:
        asked.update(kwargs)
        raise Built

    monkeypatch.setattr(module, "read_topic", read_topic)
    with pytest.raises(Built):
        module.build(None, load_settings(environ={}))
    assert asked.get("available_now_in_one_plan", False) is one_plan
