"""Spark adapter of the per-user metrics state (experiment_metrics): users in buckets.

Keyed by the bucket of user_id (streaming/bucketed): each user's state is a
UserMetricsState kept as bytes in its bucket's blob, and one timeout per bucket stands for
every user's next window end.

Input rows are the union of filtered events and filtered activations (`source` tells which);
output rows are per-window deltas (`kind` = "delta", one column per counted metric, named as
in experiment_metrics), the users' provisional deltas of the live totals (`kind` =
"provisional", window_end null; core/provisional.py), dead letters (`kind` = "dead") or the
count of de-duplicated events (`kind` = "dropped", reason `duplicate`). Each record goes
through `per_record.each_record`: one that raises becomes an `error` dead letter, and the
user's state changes only once a record passed its checks (core/user_metrics.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import orjson
from pyspark.sql import Row
from pyspark.sql.types import (
    BooleanType,
    LongType,
    StringType,
    StructField,
)

from spark_jobs.contracts.reasons import DUPLICATE, LATE, MALFORMED
from spark_jobs.experiments.core.metrics import COUNT_COLUMNS, COVARIATE_COLUMNS
from spark_jobs.experiments.core.tumbling_windows import late_detail
from spark_jobs.experiments.core.user_metrics import Delta, MetricParams, Outcome, UserMetricsState
from spark_jobs.experiments.processors.per_record import each_record
from spark_jobs.streaming.bucketed.processor import BucketedProcessor
from spark_jobs.streaming.output_rows import output_schema

SOURCE_EVENT = "event"
SOURCE_ACTIVATION = "activation"

METRIC_DELTA_SCHEMA = output_schema(
    StructField("experiment_hash", StringType(), True),
    StructField("experiment_group", StringType(), True),
    StructField("period_start", LongType(), True),
    StructField("is_control", BooleanType(), True),
    StructField("event_type", StringType(), True),
    StructField("window_end", LongType(), True),
    StructField("triggered", LongType(), True),
    *(StructField(column, LongType(), True) for column in COUNT_COLUMNS),
    *(StructField(column, LongType(), True) for column in COVARIATE_COLUMNS),
)


def _decoded_json(row: Any) -> str:
    if row.source == SOURCE_EVENT:
        fields = {"user_id": row.user_id, "event_type": row.event_type, "ts": row.ts}
    else:
        fields = {
            "user_id": row.user_id, "experiment_hash": row.experiment_hash,
            "experiment_group": row.experiment_group, "ts": row.ts,
            "group_ramp_time": row.group_ramp_time, "is_control": row.is_control,
        }
    return orjson.dumps(fields).decode()


# what the processor reads of an input row (experiment_metrics.build selects them)
INPUT_FIELDS = (
    "user_id", "source", "event_type", "experiment_hash", "experiment_group",
    "group_ramp_time", "is_control", "ts", "kafka_topic", "kafka_partition", "kafka_offset",
    "kafka_timestamp", "kafka_key", "error", "raw_value",
)


class UserMetricsProcessor(BucketedProcessor[UserMetricsState]):
    """Dedup, first trigger, activation-event join and per-window deltas for each user."""

    key_field = "user_id"

    def __init__(self, params: MetricParams) -> None:
        super().__init__(METRIC_DELTA_SCHEMA, INPUT_FIELDS)
        self.params = params

    def load(self, payload: bytes | None) -> UserMetricsState:
        return UserMetricsState.from_bytes(self.params, payload)

    def on_rows(self, key: Any, state: UserMetricsState, rows: list[Any], watermark_ms: int
                ) -> Iterator[Row]:
        yield from self.user_rows(state, rows, watermark_ms)
        yield from self.on_due(key, state, watermark_ms)

    def on_due(self, key: Any, state: UserMetricsState, watermark_ms: int) -> Iterator[Row]:
        """The user's provisional deltas (before `advance` expires memberships), then the
        deltas of the user's windows the watermark closed."""
        for delta in state.provisional():
            yield self._delta_row(delta, "provisional")
        for delta in state.advance(watermark_ms):
            yield self._delta_row(delta)

    def user_rows(self, user: UserMetricsState, rows: Iterable[Any], watermark_ms: int
                  ) -> Iterator[Row]:
        """The output of one user's rows of a batch (before windows advance)."""
        return each_record(self, rows, lambda row: self.one_record(user, row, watermark_ms))

    def one_record(self, user: UserMetricsState, row: Row, watermark_ms: int
                   ) -> tuple[Row, ...]:
        """One record into the user's state: nothing to emit, a duplicate's count, or a dead
        letter (undecodable, late, or an activation outside the period it names)."""
        if row.error is not None:
            return (self.undecodable(row),)
        if row.source == SOURCE_EVENT:
            outcome = user.add_event(row.event_type, row.ts, watermark_ms)
        else:
            outcome = user.add_activation(
                row.experiment_hash, row.experiment_group, row.group_ramp_time,
                row.is_control, row.ts, watermark_ms,
            )
        if outcome is Outcome.DUPLICATE:
            return (self.dropped(DUPLICATE, 1),)
        if outcome is Outcome.LATE:
            return (self.dead(row, LATE, _decoded_json(row), late_detail(row.ts, watermark_ms)),)
        if outcome is Outcome.OUTSIDE_PERIOD:
            return (self.dead(row, MALFORMED, _decoded_json(row), self._outside_detail(row)),)
        return ()

    def _outside_detail(self, row: Row) -> str:
        """A filtered activation must lie in the period its group_ramp_time starts; one that
        does not was not written by filter_activations."""
        end = row.group_ramp_time + self.params.period_ms
        return (f"activation ts {row.ts} is outside the period [{row.group_ramp_time}, {end}) "
                f"that its group_ramp_time starts")

    def _delta_row(self, delta: Delta, kind: str = "delta") -> Row:
        return self.row(
            kind, experiment_hash=delta.experiment_hash,
            experiment_group=delta.experiment_group, period_start=delta.period_start,
            is_control=delta.is_control, event_type=delta.event_type,
            window_end=delta.window_end, triggered=delta.triggered,
            **dict(zip(COUNT_COLUMNS, delta.counts, strict=True)),
            **dict(zip(COVARIATE_COLUMNS, delta.covariates, strict=True)),
        )
