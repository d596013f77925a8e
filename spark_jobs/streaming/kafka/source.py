"""`tideline_kafka`: a PySpark streaming Data Source reading one Kafka topic with exact offsets.

Spark has no Kafka connector here (no jars can be fetched), so this source does the Kafka work
in Python. Offsets are `{"<partition>": next offset to read}` for every partition and live in
Spark's checkpoint, so a restarted query replays exactly the ranges it planned. Per-trigger
limits (`maxRecordsPerTrigger`) are split across partitions in proportion to their backlog, so
event time advances evenly; `trigger(availableNow=True)` reads what existed when the query
started, in limited batches, and stops. With `record=<spec>` values are decoded here (orjson)
and a message that does not decode becomes an error row (reason and raw text); nothing is
ever dropped. With `prefetch=true` the records come from the planner's tail index instead of
tasks that fetch them again (kafka/prefetch.py): less parallel, ~100 ms less per micro-batch.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, Message, TopicPartition
from pyspark.errors import PySparkNotImplementedError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
    SimpleDataSourceStreamReader,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from spark_jobs.contracts.records import (
    BOOL,
    LONG,
    SPECS,
    STRING,
    TIME_MS,
    RecordError,
    RecordSpec,
)
from spark_jobs.settings import KafkaSettings
from spark_jobs.streaming.kafka.admin import (
    beginning_offsets_with,
    end_offsets_with,
    planning_consumer,
)
from spark_jobs.streaming.kafka.event_time_split import align_on_event_time
from spark_jobs.streaming.kafka.range_consumers import WORKER_CONSUMERS
from spark_jobs.streaming.kafka.tail_index import TailIndex
from spark_jobs.streaming.kafka.timestamps import RecordProbe, event_time_of

SOURCE_NAME = "tideline_kafka"
STARTING = ("earliest", "latest")
DEFAULT_READ_TIMEOUT_MS = 120_000
# A topic read together with others that has had nothing new for this long stops holding the
# others back (Flink's "idleness"); safe while it is well below the watermark's lateness.
DEFAULT_IDLE_TIMEOUT_MS = 30_000
BATCH_ROWS = 10_000  # rows per Arrow batch handed to Spark
CHUNK = 5_000  # messages per consume() call

_SPARK_TYPES: dict[str, DataType] = {
    LONG: LongType(), TIME_MS: LongType(), STRING: StringType(), BOOL: BooleanType()
}
_ARROW_TYPES: dict[str, pa.DataType] = {
    LONG: pa.int64(), TIME_MS: pa.int64(), STRING: pa.string(), BOOL: pa.bool_()
}

RAW_SCHEMA = StructType(
    [
        StructField("kafka_key", StringType()),
        StructField("value", BinaryType()),
        StructField("kafka_topic", StringType()),
        StructField("kafka_partition", IntegerType()),
        StructField("kafka_offset", LongType()),
        StructField("kafka_timestamp", LongType()),
    ]
)
RECORD_META_FIELDS = (
    StructField("kafka_key", StringType()),
    StructField("kafka_topic", StringType()),
    StructField("kafka_partition", IntegerType()),
    StructField("kafka_offset", LongType()),
    StructField("kafka_timestamp", LongType()),
    StructField("error", StringType()),
    StructField("raw_value", StringType()),
)


class SourceOptionError(ValueError):
    """An option of the tideline_kafka source is missing or invalid."""


class RangeReadError(RuntimeError):
    """A planned offset range cannot be read completely (data deleted, broker gone, ...)."""


@dataclass(frozen=True)
class SourceOptions:
    """The validated options of one tideline_kafka source."""

    bootstrap: str
    topic: str
    client: dict[str, Any]
    record: str | None = None
    max_records_per_trigger: int | None = None
    starting: str = "earliest"
    read_timeout_ms: int = DEFAULT_READ_TIMEOUT_MS
    idle_timeout_ms: int = DEFAULT_IDLE_TIMEOUT_MS
    prefetch: bool = False

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        """Validate Spark's (case-insensitive) option map; SourceOptionError names the option."""

        def get(name: str) -> str | None:
            value = options.get(name)
            return None if value is None or str(value).strip() == "" else str(value).strip()

        bootstrap, topic = get("bootstrap"), get("topic")
        for name, value in (("bootstrap", bootstrap), ("topic", topic)):
            if value is None:
                raise SourceOptionError(f"{SOURCE_NAME}: option {name!r} is required")
        try:
            client = json.loads(get("client") or "{}")
        except json.JSONDecodeError as exc:
            raise SourceOptionError(f"{SOURCE_NAME}: option 'client' is not JSON: {exc}") from None
        if not isinstance(client, dict):
            raise SourceOptionError(f"{SOURCE_NAME}: option 'client' must be a JSON object")
        record = get("record")
        topics = [t.strip() for t in topic.split(",") if t.strip()]  # type: ignore[union-attr]
        if record is not None:
            names = [r.strip() for r in record.split(",")]
            unknown = [r for r in names if r not in SPECS]
            if unknown:
                known = ", ".join(sorted(SPECS))
                raise SourceOptionError(
                    f"{SOURCE_NAME}: unknown record {unknown[0]!r} (known: {known})"
                )
            if len(names) not in (1, len(topics)):
                raise SourceOptionError(
                    f"{SOURCE_NAME}: give one record spec, or one per topic ({len(topics)})"
                )
        prefetch = (get("prefetch") or "false").lower()
        if prefetch not in ("true", "false"):
            raise SourceOptionError(
                f"{SOURCE_NAME}: prefetch must be true or false, got {prefetch!r}"
            )
        starting = (get("startingOffsets") or "earliest").lower()
        if starting not in STARTING:
            raise SourceOptionError(
                f"{SOURCE_NAME}: startingOffsets must be earliest or latest, got {starting!r}"
            )
        return cls(
            bootstrap=bootstrap,  # type: ignore[arg-type]
            topic=topic,  # type: ignore[arg-type]
            client=client,
            record=record,
            max_records_per_trigger=_positive(get("maxRecordsPerTrigger"), "maxRecordsPerTrigger"),
            starting=starting,
            read_timeout_ms=_positive(get("readTimeoutMs"), "readTimeoutMs")
            or DEFAULT_READ_TIMEOUT_MS,
            idle_timeout_ms=_positive(get("idleTimeoutMs"), "idleTimeoutMs")
            or DEFAULT_IDLE_TIMEOUT_MS,
            prefetch=prefetch == "true",
        )

    @property
    def topics(self) -> tuple[str, ...]:
        """The topics read together (comma-separated `topic` option)."""
        return tuple(t.strip() for t in self.topic.split(",") if t.strip())

    @property
    def records(self) -> tuple[str, ...] | None:
        """Spec name per topic, aligned with `topics` (one name applies to every topic)."""
        if not self.record:
            return None
        names = tuple(r.strip() for r in self.record.split(","))
        return names * len(self.topics) if len(names) == 1 else names

    def spec_of(self, topic: str) -> RecordSpec | None:
        records = self.records
        return None if records is None else SPECS[records[self.topics.index(topic)]]

    def key(self, topic: str, partition: int | str) -> str:
        """Offset key of a partition: `p` for one topic, `topic/p` for several."""
        return str(partition) if len(self.topics) == 1 else f"{topic}/{partition}"

    def split_key(self, key: str) -> tuple[str, int]:
        if len(self.topics) == 1:
            return self.topics[0], int(key)
        topic, _, partition = key.rpartition("/")
        return topic, int(partition)

    @property
    def kafka(self) -> KafkaSettings:
        return KafkaSettings(bootstrap=self.bootstrap, client=self.client, partitions=1)


    def as_spark_options(self) -> dict[str, str]:
        out = {
            "bootstrap": self.bootstrap,
            "topic": self.topic,
            "client": json.dumps(self.client),
            "startingOffsets": self.starting,
            "readTimeoutMs": str(self.read_timeout_ms),
            "idleTimeoutMs": str(self.idle_timeout_ms),
            "prefetch": str(self.prefetch).lower(),
        }
        if self.record:
            out["record"] = self.record
        if self.max_records_per_trigger:
            out["maxRecordsPerTrigger"] = str(self.max_records_per_trigger)
        return out


def _positive(text: str | None, name: str) -> int | None:
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise SourceOptionError(f"{SOURCE_NAME}: {name} must be a positive integer, got {text!r}")
    return value


def record_fields(record: str | None) -> tuple[tuple[str, str], ...]:
    """The decoded columns: the fields of every named spec, in order of first appearance."""
    fields: dict[str, str] = {}
    for name in (record or "").split(","):
        if name.strip():
            for field, kind in SPECS[name.strip()].fields:
                fields.setdefault(field, kind)
    return tuple(fields.items())


def source_schema(record: str | None) -> StructType:
    """Raw columns, or the specs' fields (all nullable) followed by Kafka and error columns."""
    if not record:
        return RAW_SCHEMA
    fields = [StructField(name, _SPARK_TYPES[kind]) for name, kind in record_fields(record)]
    return StructType([*fields, *RECORD_META_FIELDS])


def arrow_schema(record: str | None) -> pa.Schema:
    """The Arrow schema Spark expects for `source_schema(record)` (checked on the first batch)."""
    if not record:
        fields = [
            pa.field("kafka_key", pa.string()),
            pa.field("value", pa.binary()),
        ]
    else:
        fields = [pa.field(name, _ARROW_TYPES[kind]) for name, kind in record_fields(record)]
        fields.append(pa.field("kafka_key", pa.string()))
    fields += [
        pa.field("kafka_topic", pa.string()),
        pa.field("kafka_partition", pa.int32()),
        pa.field("kafka_offset", pa.int64()),
        pa.field("kafka_timestamp", pa.int64()),
    ]
    if record:
        fields += [pa.field("error", pa.string()), pa.field("raw_value", pa.string())]
    return pa.schema(fields)


def split_limit(available: Mapping[str, int], limit: int) -> dict[str, int]:
    """How many records to take per partition: all if they fit, else in proportion to backlog.

    Every partition with data gets at least one when the limit allows; the sum is exactly
    min(limit, total) and no partition gets more than it has.
    """
    total = sum(available.values())
    if total <= limit:
        return dict(available)
    take = {p: 0 for p in available}
    nonempty = sorted((p for p, n in available.items() if n > 0), key=lambda p: (-available[p], p))
    if limit < len(nonempty):
        for p in nonempty[:limit]:
            take[p] = 1
        return take
    # Largest-remainder apportionment of `limit` in proportion to the backlog ...
    remainders = []
    for p in nonempty:
        take[p], remainder = divmod(limit * available[p], total)
        remainders.append((-remainder, p))
    left = limit - sum(take.values())
    for _, p in sorted(remainders)[:left]:
        take[p] += 1  # floor(limit * n / total) < n since limit < total: this always fits
    # ... then one record for every partition with data, taken from the biggest shares.
    for p in nonempty:
        if take[p] == 0:
            donor = max(nonempty, key=take.__getitem__)
            take[donor] -= 1
            take[p] = 1
    return take


class KafkaRange(InputPartition):
    """Offsets [start, end) of one Kafka partition: one Spark task."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end


class TidelineKafkaSource(DataSource):
    """Options: bootstrap, topic, client (JSON), record, maxRecordsPerTrigger, startingOffsets;
    batch reads also take startingTimestamp and endingTimestamp (epoch ms)."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.parsed = SourceOptions.parse(options)

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        return source_schema(self.parsed.record)

    def streamReader(self, schema: StructType) -> TidelineKafkaStreamReader:
        if self.parsed.prefetch:  # Spark then asks for the simple (prefetching) reader
            raise PySparkNotImplementedError(
                errorClass="NOT_IMPLEMENTED", messageParameters={"feature": "streamReader"}
            )
        return TidelineKafkaStreamReader(self.parsed)

    def simpleStreamReader(self, schema: StructType) -> SimpleDataSourceStreamReader:
        from spark_jobs.streaming.kafka.prefetch import TidelineKafkaPrefetchReader

        return TidelineKafkaPrefetchReader(self.parsed)

    def reader(self, schema: StructType) -> DataSourceReader:
        """Batch reads (`spark.read`), see kafka/batch_reader.py."""
        from spark_jobs.streaming.kafka.batch_reader import TidelineKafkaBatchReader, batch_options

        return TidelineKafkaBatchReader(*batch_options(self.options))


class TidelineKafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans offset ranges on the driver; `read` runs in the executors' Python workers."""

    def __init__(self, options: SourceOptions, keep_records: bool = False) -> None:
        self.options = options
        self._keep_records = keep_records  # the tail index keeps records for a prefetch
        self._target: dict[str, int] | None = None
        self._latest: dict[str, int] | None = None
        self._last_new: dict[str, float] = {}  # monotonic time a topic last had new data
        self._planner: Consumer | None = None  # kept for the query's life (see admin)
        self._tail: TailIndex | None = None  # ends and recent event times, kept current

    def _planning_consumer(self) -> Consumer:
        if self._planner is None:
            self._planner = planning_consumer(self.options.kafka)
        return self._planner

    def __getstate__(self) -> dict[str, object]:
        """A copy sent to the executors (for `read`) takes no planning consumers along."""
        return {**self.__dict__, "_planner": None, "_tail": None}

    def stop(self) -> None:
        """The query stopped: release the planning consumers."""
        if self._tail is not None:
            self._tail.close()
            self._tail = None
        if self._planner is not None:
            self._planner.close()
            self._planner = None

    def _event_fields(self) -> dict[str, str | None]:
        """The event-time field of each topic (None: Kafka time), as admission control uses."""
        return {
            topic: "ts" if spec is not None and "ts" in spec.field_names else None
            for topic in self.options.topics
            for spec in [self.options.spec_of(topic)]
        }

    def _tail_index(self) -> TailIndex:
        if self._tail is None:
            fields = self._event_fields()
            self._tail = TailIndex(self.options.kafka, self.options.topics,
                                   lambda message: event_time_of(message, fields),
                                   self.options.key, keep_records=self._keep_records)
        return self._tail

    def _current_ends(self, begin_of: Mapping[str, int]) -> dict[str, int]:
        """End offsets for a streaming plan: from the tail index when it vouches for every
        partition (and none is behind the plan's start), else looked up in Kafka."""
        if self._target is None and self._latest is not None:
            ends = self._tail_index().ends(list(self._latest))
            if ends is not None and all(e >= int(begin_of.get(k, 0)) for k, e in ends.items()):
                self._latest = ends
                return ends
        ends = self._end_offsets()
        if self._target is None:
            self._tail_index()  # start tailing once the partitions are known
        return ends

    # -- planning (driver) ---------------------------------------------------------------

    def _end_offsets(self) -> dict[str, int]:
        ends = {
            self.options.key(topic, p): n
            for topic in self.options.topics
            for p, n in end_offsets_with(self._planning_consumer(), self.options.kafka,
                                         topic).items()
        }
        self._latest = ends
        return ends

    def _beginnings(self) -> dict[str, int]:
        return {
            self.options.key(topic, p): n
            for topic in self.options.topics
            for p, n in beginning_offsets_with(self._planning_consumer(), self.options.kafka,
                                               topic).items()
        }

    def _sorted(self, offsets: Mapping[str, int]) -> dict[str, int]:
        return {k: offsets[k] for k in sorted(offsets, key=self.options.split_key)}

    def initialOffset(self) -> dict[str, int]:
        if self.options.starting == "latest":
            return self._end_offsets()
        return self._beginnings()

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_records_per_trigger:
            return ReadMaxRows(self.options.max_records_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Freeze the end: an availableNow query reads only what exists now, then stops."""
        self._target = self._end_offsets()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        ends = self._current_ends(start)
        begin = self._full_start(start, ends)
        for p, e in ends.items():
            if e < begin[p]:
                raise RangeReadError(
                    f"{self.options.split_key(p)}: the checkpoint is at offset {begin[p]} but the "
                    f"partition ends at {e}; the topic was recreated or truncated. Delete the "
                    "query's checkpoint to start over."
                )
        target = self._target
        if target is not None:
            ends = {p: max(begin[p], min(e, target.get(p, begin[p]))) for p, e in ends.items()}
        available = {p: ends[p] - begin[p] for p in ends}
        limited = isinstance(limit, ReadMaxRows) and sum(available.values()) > limit.max_rows
        planned = ends
        if limited:
            take = split_limit(available, limit.max_rows)
            planned = {p: begin[p] + take[p] for p in ends}
        if limited or len(self.options.topics) > 1:
            planned = self._aligned(begin, planned, available)
        return self._sorted(planned)

    def _aligned(
        self, begin: dict[str, int], planned: dict[str, int], available: dict[str, int]
    ) -> dict[str, int]:
        """Cut the plan back to the slowest topic's event time (see event_time_split)."""
        topic_of = self._topic_of
        now = time.monotonic()
        with_new = {topic_of(p) for p, n in available.items() if n > 0}
        for topic in self.options.topics:
            if topic in with_new or topic not in self._last_new:
                self._last_new[topic] = now
        idle = {topic_of(p) for p in planned} - with_new
        if self._target is not None:  # available-now: a topic with nothing left never will
            exhausted = idle
        else:
            timeout_s = self.options.idle_timeout_ms / 1000
            exhausted = {t for t in idle if now - self._last_new[t] > timeout_s}
        first = self._beginnings() if idle - exhausted else {}
        tail = self._tail
        with RecordProbe(self.options.kafka, self.options.split_key, self._event_fields(),
                         self._planning_consumer()) as probe:

            def event_times(offsets: Mapping[str, int]) -> dict[str, int]:
                found = {} if tail is None else tail.event_times(offsets)
                missing = {key: at for key, at in offsets.items() if key not in found}
                return {**found, **probe.event_times(missing)} if missing else found

            return align_on_event_time(begin, planned, event_times, topic_of, exhausted, first)

    def _topic_of(self, key: str) -> str:
        return self.options.split_key(key)[0]

    def _full_start(self, start: Mapping[str, int], ends: Mapping[str, int]) -> dict[str, int]:
        """Start offsets for every partition; partitions added later start at their beginning."""
        begin = {str(p): int(n) for p, n in start.items()}
        if any(p not in begin for p in ends):
            beginnings = self._beginnings()
            for p in ends:
                begin.setdefault(p, beginnings.get(p, 0))
        return begin

    def reportLatestOffset(self) -> dict[str, int] | None:
        return self._latest

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[KafkaRange]:
        begin = self._full_start(start, end)
        ranges = []
        for key in sorted(end, key=self.options.split_key):
            first, stop = begin[key], int(end[key])
            topic, partition = self.options.split_key(key)
            if stop < first:
                raise RangeReadError(f"{topic}/{partition}: end {stop} before start {first}")
            if stop > first:
                ranges.append(KafkaRange(topic, partition, first, stop))
        return ranges

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to do: progress lives in Spark's checkpoint, never in Kafka."""

    def kept_records(self, part: KafkaRange) -> list[Message] | None:
        """A planned range's records, if the tail index kept them all (see prefetch)."""
        if self._tail is None:
            return None
        return self._tail.records(self.options.key(part.topic, part.partition), part.start,
                                  part.end)

    def release_records(self, before: Mapping[str, int]) -> None:
        """Let the tail index forget records before these offsets."""
        if self._tail is not None:
            self._tail.release({str(k): int(n) for k, n in before.items()})

    # -- reading (executors) -------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, KafkaRange)
        return read_range(self.options, partition)


_TRANSIENT = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._TIMED_OUT,
        KafkaError._RESOLVE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.REQUEST_TIMED_OUT,
    }
)


def decoded_batches(
    options: SourceOptions, part: KafkaRange, messages: list[Message]
) -> Iterator[pa.RecordBatch]:
    """Arrow batches (of at most BATCH_ROWS) of messages already fetched from one partition."""
    schema = arrow_schema(options.record)
    spec = options.spec_of(part.topic)
    decode = _raw_batch if spec is None else _record_batch
    for first in range(0, len(messages), BATCH_ROWS):
        yield decode(messages[first:first + BATCH_ROWS], part, spec, schema)


def read_range(options: SourceOptions, part: KafkaRange) -> Iterator[pa.RecordBatch]:
    """Yield Arrow batches of exactly the offsets [start, end) of one partition."""
    consumer = WORKER_CONSUMERS.take(options.kafka, part.topic, part.partition, part.start)
    timeout_s = options.read_timeout_ms / 1000
    complete = False
    try:
        position, end = part.start, part.end
        pending: list[Message] = []
        last_progress = time.monotonic()
        last_error: KafkaError | None = None
        while position < end:
            before = position
            messages = consumer.consume(num_messages=min(CHUNK, end - position), timeout=0.5)
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        if message.offset() >= end:
                            position = end  # the rest of the range is a gap (compaction, markers)
                        continue
                    if error.fatal() or not (error.retriable() or error.code() in _TRANSIENT):
                        raise RangeReadError(
                            f"{part.topic}/{part.partition}: cannot read offsets "
                            f"[{position}, {end}): {error} (deleted by retention, or the topic "
                            "was recreated?)"
                        )
                    last_error = error  # broker unreachable for a moment: keep trying
                    continue
                offset = message.offset()
                if offset > position:
                    _check_not_deleted(consumer, part, position)
                if offset >= end:
                    position = end
                    break
                if offset >= position:
                    pending.append(message)
                    position = offset + 1
            if position > before:
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > timeout_s:
                raise RangeReadError(
                    f"{part.topic}/{part.partition}: no progress for {timeout_s:g} s at offset "
                    f"{position}, range [{part.start}, {end}) cannot be completed "
                    f"(last error: {last_error})"
                )
            if len(pending) >= BATCH_ROWS:
                yield from decoded_batches(options, part, pending)
                pending = []
        if pending:
            yield from decoded_batches(options, part, pending)
        complete = True
    finally:
        if complete:  # kept for this partition's next range (usually the next batch's)
            WORKER_CONSUMERS.give_back(options.kafka, part.topic, part.partition, consumer)
        else:
            consumer.close()


def _check_not_deleted(consumer: Consumer, part: KafkaRange, position: int) -> None:
    """A gap in the offsets is fine (transaction markers) unless the log now starts after it."""
    low, _ = consumer.get_watermark_offsets(
        TopicPartition(part.topic, part.partition), cached=True
    )
    if low > position:
        raise RangeReadError(
            f"{part.topic}/{part.partition}: offsets [{position}, {low}) of the planned range "
            f"[{part.start}, {part.end}) were deleted (retention?) before they were read"
        )


def _meta_columns(
    messages: list[Message],
) -> tuple[list[str | None], list[int], list[int | None]]:
    """Key text, offset and message timestamp (ms; null if the broker has none) per message."""
    keys: list[str | None] = []
    offsets: list[int] = []
    stamps: list[int | None] = []
    for message in messages:
        key = message.key()
        keys.append(None if key is None else key.decode("utf-8", "replace"))
        offsets.append(message.offset())
        kind, stamp = message.timestamp()
        stamps.append(stamp if kind else None)
    return keys, offsets, stamps


def _constant_columns(part: KafkaRange, rows: int) -> list[pa.Array]:
    return [
        pa.array([part.topic] * rows, pa.string()),
        pa.array([part.partition] * rows, pa.int32()),
    ]


def _raw_batch(
    messages: list[Message], part: KafkaRange, spec: RecordSpec | None, schema: pa.Schema
) -> pa.RecordBatch:
    keys, offsets, stamps = _meta_columns(messages)
    values = [message.value() for message in messages]
    arrays = [
        pa.array(keys, pa.string()),
        pa.array(values, pa.binary()),
        *_constant_columns(part, len(messages)),
        pa.array(offsets, pa.int64()),
        pa.array(stamps, pa.int64()),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _record_batch(
    messages: list[Message], part: KafkaRange, spec: RecordSpec | None, schema: pa.Schema
) -> pa.RecordBatch:
    assert spec is not None
    decode = spec.decode
    empty = (None,) * len(spec.fields)
    rows: list[tuple[Any, ...]] = []
    failures: dict[int, tuple[str, str | None]] = {}
    for index, message in enumerate(messages):
        value = message.value()
        try:
            rows.append(decode(value))
        except RecordError as exc:
            rows.append(empty)
            raw = None if value is None else value.decode("utf-8", "replace")
            failures[index] = (str(exc), raw)
    columns = list(zip(*rows, strict=True))
    keys, offsets, stamps = _meta_columns(messages)
    errors: list[str | None] = [None] * len(messages)
    raws: list[str | None] = [None] * len(messages)
    for index, (reason, raw) in failures.items():
        errors[index] = reason
        raws[index] = raw
    by_name = dict(zip(spec.field_names, columns, strict=True))
    nulls = [None] * len(messages)
    arrays = [
        pa.array(by_name.get(field.name, nulls), field.type)
        for field in schema
        if field.name not in _META_NAMES
    ]
    arrays += [
        pa.array(keys, pa.string()),
        *_constant_columns(part, len(messages)),
        pa.array(offsets, pa.int64()),
        pa.array(stamps, pa.int64()),
        pa.array(errors, pa.string()),
        pa.array(raws, pa.string()),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


_META_NAMES = frozenset(field.name for field in RECORD_META_FIELDS)


def register(spark: SparkSession) -> None:
    """Make `format("tideline_kafka")` available in this session."""
    spark.dataSource.register(TidelineKafkaSource)


def read_topic(
    spark: SparkSession,
    kafka: KafkaSettings,
    topic: str | Sequence[str],
    record: str | Sequence[str] | None = None,
    max_records_per_trigger: int | None = None,
    starting: str = "earliest",
    idle_timeout_ms: int | None = None,
    prefetch: bool = False,
) -> DataFrame:
    """A streaming DataFrame of one or several topics read together (raw, or decoded with the
    record spec of each topic); several topics share one offset plan and one admission limit,
    so their event times advance together."""
    options = SourceOptions.parse(
        {
            "bootstrap": kafka.bootstrap,
            "topic": topic if isinstance(topic, str) else ",".join(topic),
            "client": json.dumps(kafka.client),
            "record": (record if isinstance(record, str) else ",".join(record)) if record else "",
            "maxRecordsPerTrigger": "" if max_records_per_trigger is None else str(
                max_records_per_trigger
            ),
            "startingOffsets": starting,
            "idleTimeoutMs": "" if idle_timeout_ms is None else str(idle_timeout_ms),
            "prefetch": str(prefetch).lower(),
        }
    )
    register(spark)
    return spark.readStream.format(SOURCE_NAME).options(**options.as_spark_options()).load()
