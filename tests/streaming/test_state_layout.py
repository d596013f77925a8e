"""A checkpoint of another state layout: the job's failure says which checkpoint to delete."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from spark_jobs.streaming.state_layout import state_layout_advice

SPARK_TEXT = (
    "[STREAM_FAILED] Query [id = 66df, runId = e6fb] terminated with exception: "
    "[STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA] Streaming stateful operator "
    "name does not match with the operator in state metadata."
)


def test_advice_names_the_checkpoint_and_what_to_do() -> None:
    advice = state_layout_advice("experiment_metrics", SPARK_TEXT, "/lake/_checkpoints/em")
    assert advice is not None
    assert "experiment_metrics" in advice and "delete /lake/_checkpoints/em" in advice
    assert "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA" in advice


def test_other_failures_get_no_advice() -> None:
    assert state_layout_advice("filter_events", "Kafka broker unreachable", "/c") is None


def _count_rows(key: Any, frames: Iterator[pd.DataFrame], state: Any) -> Iterator[pd.DataFrame]:
    state.update((b"x",))
    yield pd.DataFrame({"k": [key[0]], "n": [sum(len(frame) for frame in frames)]})


@pytest.mark.spark
def test_spark_refusal_of_an_earlier_layout_is_recognized(spark: Any, tmp_path: Path) -> None:
    """What Spark really says when a job moves from transformWithState to bucketed state."""
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    class Counting(StatefulProcessor):
        def init(self, handle: Any) -> None:
            pass

        def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:
            yield pd.DataFrame({"k": [key[0]], "n": [sum(len(frame) for frame in rows)]})

        def close(self) -> None:
            pass

    def earlier(stream: Any) -> Any:
        return stream.groupBy("k").transformWithStateInPandas(
            Counting(), outputStructType="k long, n long", outputMode="Append", timeMode="None")

    checkpoint, failure = _second_plan_failure(spark, tmp_path, earlier, _bucketed("binary"))
    advice = state_layout_advice("experiment_metrics", str(failure), checkpoint)
    assert advice is not None and checkpoint in advice


@pytest.mark.spark
def test_spark_refuses_a_binary_blob_now_kept_as_text(spark: Any, tmp_path: Path) -> None:
    """The bucket blobs moved from a binary to a text column (streaming/state_text.py): a
    checkpoint of the binary ones stops the job with the advice, its bytes are never read as
    text."""
    checkpoint, failure = _second_plan_failure(spark, tmp_path, _bucketed("binary"),
                                               _bucketed("string"))
    advice = state_layout_advice("training_samples", str(failure), checkpoint)
    assert advice is not None and "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE" in advice


def _bucketed(blob_type: str) -> Any:
    from pyspark.sql.streaming.state import GroupStateTimeout

    def plan(stream: Any) -> Any:
        return stream.groupBy("k").applyInPandasWithState(
            _count_rows, "k long, n long", f"blob {blob_type}", "Append",
            GroupStateTimeout.NoTimeout)
    return plan


def _second_plan_failure(spark: Any, tmp_path: Path, earlier: Any, now: Any
                         ) -> tuple[str, Any]:
    """Run `earlier` then `now` on one checkpoint; the second run's failure."""
    source = spark.range(20).selectExpr("id % 3 AS k", "id")
    path = tmp_path / "input"
    source.write.parquet(str(path))
    stream = spark.readStream.schema(source.schema).parquet(str(path))
    checkpoint = str(tmp_path / "checkpoint")
    for plan in (earlier(stream), now(stream)):
        source.write.mode("append").parquet(str(path))  # new input: the plan runs a batch
        query = (plan.writeStream.format("noop").option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        with contextlib.suppress(Exception):  # the second query's failure is read below
            query.awaitTermination(120)
    failure = query.exception()
    assert failure is not None
    return checkpoint, failure
