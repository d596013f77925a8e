"""Spark adapter of the training-sample join (training_samples): users in buckets.

Keyed by the bucket of user_id (streaming/bucketed): each user's pending views, engagements
and duplicate markers are a UserJoinState kept as bytes in its bucket's blob, and one
event-time timeout per bucket stands for every user's next close, so a user who goes quiet
still gets samples and orphans out when event time moves on.

Rows are the raw messages of `views` and `engagements`, after the view de-duplication
(dedup_processor.py: a duplicate view carries its first arrival's user and post); the
processor parses them with the domain's parsers, runs `add_records` then `advance` at the
batch's watermark for each user of the batch, and `advance` alone for a user whose close has
come without records.
Output rows have a `kind`: sample, orphan, dead, or dropped (the count of views dropped as
later arrivals of an id, reason `duplicate_view`, for the job's drop counts).

No record stops the job (CONTRACTS section 9): messages are decoded through the JSON gate with
`jobs.max_message_bytes`, a record whose processing raises becomes an `error` dead letter
while the others of its batch go on (core/isolation.py), and the base dead-letters records
from the `future` before any state is read.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from pyspark.sql.types import (
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from spark_jobs.contracts.json_gate import DEFAULT_MAX_MESSAGE_BYTES
from spark_jobs.contracts.reasons import DUPLICATE_VIEW, ERROR
from spark_jobs.contracts.topics import TOPIC_VIEWS
from spark_jobs.samples.core.dedup import DuplicateView
from spark_jobs.samples.core.isolation import add_isolated
from spark_jobs.samples.core.joiner import (
    JoinParameters,
    StepResult,
    UserJoinState,
    advance,
)
from spark_jobs.samples.core.outputs import LATE, VIEW_MISMATCH
from spark_jobs.samples.core.records import (
    MALFORMED,
    Engagement,
    Rejected,
    Source,
    View,
    parse_engagement,
    parse_view,
)
from spark_jobs.samples.processors.dedup_processor import (
    FIRST_POST,
    FIRST_TS,
    FIRST_USER,
    PARSED,
    parsed_view,
)
from spark_jobs.streaming.bucketed.processor import BucketedProcessor
from spark_jobs.streaming.lake.dead_letters import DeadLetter
from spark_jobs.streaming.output_rows import PositionalRow
from spark_jobs.streaming.processor import output_schema as processor_schema

KIND_SAMPLE, KIND_ORPHAN = "sample", "orphan"
_DETAILS = {  # the detail of a join's dead letter (the parser gives its own)
    LATE: "ts is behind the watermark of training_samples (samples.lateness)",
    VIEW_MISMATCH: "view_id names a view of another user or post",
}
_ORIGIN = ("topic", "partition", "offset", "kafka_timestamp", "key")
_SAMPLE_COLUMNS = ("kind", "sample_id", "view_id", "user_id", "post_id", "ts", "context",
                   "labels", *_ORIGIN)
_ORPHAN_COLUMNS = ("kind", "view_id", "user_id", "post_id", "ts", "signal", *_ORIGIN,
                   "raw_value", "reason")
# what the processor reads of an input row (the de-duplication's output)
INPUT_FIELDS = (
    "user_id", "kafka_topic", "kafka_partition", "kafka_offset", "kafka_timestamp",
    "kafka_key", "value", FIRST_USER, FIRST_POST, FIRST_TS, *PARSED,
)


def labels_type(signals: Sequence[str]) -> StructType:
    """The labels struct: one int 0/1 field per configured signal, in config order."""
    return StructType([StructField(signal, IntegerType(), False) for signal in signals])


def output_schema(signals: Sequence[str]) -> StructType:
    """Samples (and an orphan engagement's identity), where a record came from and why (the
    dead-letter columns), and the `dropped` count (duplicate views)."""
    return processor_schema(
        StructField("sample_id", StringType(), True),
        StructField("view_id", StringType(), True),
        StructField("user_id", LongType(), True),
        StructField("post_id", LongType(), True),
        StructField("ts", LongType(), True),
        StructField("context", StringType(), True),
        StructField("labels", labels_type(signals), True),
        StructField("signal", StringType(), True),
    )


def parsed(rows: Iterable[Any], signals: Sequence[str],
           max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
           ) -> list[View | DuplicateView | Engagement | Rejected]:
    """The domain records of a key's rows (the topic says which parser; a view marked by the
    de-duplication is a DuplicateView); a parser that raises (it must not) makes its record
    an `error`."""
    records: list[View | DuplicateView | Engagement | Rejected] = []
    for row in rows:
        source = Source(row.kafka_topic, row.kafka_partition, row.kafka_offset,
                        row.kafka_timestamp, row.kafka_key)
        try:
            if row.kafka_topic == TOPIC_VIEWS:
                view = parsed_view(row, source) or parse_view(row.value, source, max_bytes)
                first_user = getattr(row, FIRST_USER, None)
                if first_user is not None and isinstance(view, View):
                    view = DuplicateView(view, first_user, getattr(row, FIRST_POST),
                                         getattr(row, FIRST_TS))
                records.append(view)
            else:
                records.append(parse_engagement(row.value, source, signals, max_bytes))
        except Exception as exc:  # one record must not stop the job
            records.append(Rejected(ERROR, None, source, f"{type(exc).__name__}: {exc}"))
    return records


class SampleJoinProcessor(BucketedProcessor[UserJoinState]):
    """Views and engagements of each user of a bucket -> samples once their window closed."""

    key_field = "user_id"

    def __init__(self, params: JoinParameters,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        super().__init__(output_schema(params.signals), INPUT_FIELDS)
        self.params = params
        self.max_message_bytes = max_message_bytes
        self._sample_row = PositionalRow(self.schema, _SAMPLE_COLUMNS)
        self._orphan_row = PositionalRow(self.schema, _ORPHAN_COLUMNS)

    def load(self, payload: bytes | None) -> UserJoinState:
        state = UserJoinState.from_bytes(payload) if payload is not None else UserJoinState()
        self._loaded = (state, payload)  # on_rows' snapshot: the isolation needs no encoding
        return state

    def on_unkeyed(self, rows: list[Any]) -> Iterator[tuple[Any, ...]]:
        """No integer user_id: the parser says why, nothing is kept."""
        for record in parsed(rows, self.params.signals, self.max_message_bytes):
            yield self.dead_letter(_rejected(record))

    def on_rows(self, key: Any, state: UserJoinState, rows: list[Any], watermark_ms: int
                ) -> Iterator[tuple[Any, ...]]:
        records = parsed(rows, self.params.signals, self.max_message_bytes)
        loaded, payload = getattr(self, "_loaded", (None, None))
        step = add_isolated(state, records, watermark_ms, self.params,
                            payload if loaded is state else None)
        _adopt(state, step.state)  # the base stores the object it loaded
        result = step.result
        result.dead_letters.extend(
            DeadLetter(ERROR, getattr(record, "raw", None), record.source,
                       f"{type(exc).__name__}: {exc}")
            for record, exc in step.failed)
        result.extend(advance(state, watermark_ms, self.params))
        return self.result_rows(result)

    def on_due(self, key: Any, state: UserJoinState, watermark_ms: int
               ) -> Iterator[tuple[Any, ...]]:
        return self.result_rows(advance(state, watermark_ms, self.params))

    def result_rows(self, result: StepResult) -> Iterator[tuple[Any, ...]]:
        """One output row per sample, orphan and dead letter of a step (and the duplicate
        count). Samples and orphans, one per view and per unmatched engagement, are built
        as plain tuples in schema order (a Row of keywords costs several times more)."""
        sample_row, orphan_row = self._sample_row, self._orphan_row
        for sample in result.samples:
            s = sample.source
            yield sample_row(KIND_SAMPLE, sample.view_id, sample.view_id, sample.user_id,
                             sample.post_id, sample.ts, sample.context, dict(sample.labels),
                             s.topic, s.partition, s.offset, s.kafka_timestamp, s.key)
        for orphan in result.orphans:
            e, s = orphan.engagement, orphan.engagement.source
            yield orphan_row(KIND_ORPHAN, e.view_id, e.user_id, e.post_id, e.ts, e.signal,
                             s.topic, s.partition, s.offset, s.kafka_timestamp, s.key, e.raw,
                             orphan.reason)
        for dead in result.dead_letters:
            if dead.detail is None and dead.reason in _DETAILS:
                dead = DeadLetter(dead.reason, dead.raw, dead.source, _DETAILS[dead.reason])
            yield self.dead_letter(dead)
        if result.duplicate_views:
            yield self.dropped(DUPLICATE_VIEW, result.duplicate_views)


def _adopt(state: UserJoinState, other: UserJoinState) -> None:
    """Make `state` hold what `other` holds (the isolation's state after a failed record)."""
    if other is not state:
        state.window_ms, state.views = other.window_ms, other.views
        state.engagements, state.markers = other.engagements, other.markers


def _rejected(record: View | DuplicateView | Engagement | Rejected) -> DeadLetter:
    if isinstance(record, Rejected):
        return DeadLetter(record.reason, record.raw, record.source, record.detail)
    if isinstance(record, DuplicateView):
        record = record.view
    # parsed fine, yet the source read no integer user_id: cannot be keyed (the source reads
    # as the parser does, kafka/json_fields.py: a guard)
    return DeadLetter(MALFORMED, record.raw or None, record.source,
                      "field 'user_id' is not an integer the source can read")
