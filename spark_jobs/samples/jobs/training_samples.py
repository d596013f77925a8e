"""training_samples: views + engagements -> one labelled training sample per view.

The seed's joiner (a KeyedCoProcessFunction over RocksDB state) as one stateful step keyed by
user_id (users kept in buckets, streaming/bucketed), which is also how the seed avoids
concurrent updates of a user: all of a user's records meet in one key, and all of a user's
samples go to one partition of the `training_samples` topic. Ahead of it, a stateful step
keyed by view_id (view_ids in buckets too) drops a view_id seen within `samples.dedup_ttl`,
across users and after its sample (CONTRACTS.md section 9), so a view yields one sample
however often it is sent. Either side may come first; a view's sample is emitted once the
watermark (`samples.lateness` behind the newest ts of either topic) passes view ts +
`samples.window`. The driver then publishes the samples as Avro
(schema versioned in spark_jobs/samples/encoding/schemas, Kafka compression
`samples.compression`), dead-letters what could not be used, appends orphan engagements, and
inserts the samples into the Delta table by (sample_id, ts): a replayed or re-delivered sample is
never written twice.

Hostile input (CONTRACTS section 9): the processor dead-letters malformed, late and future
records and isolates a record that raises; duplicate views reach the drop counts
(`duplicate_view`); a sample is bounded (core/records.py) and a sample the broker still
refuses becomes an `error` dead letter instead of failing the query (sample_topic.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from confluent_kafka import Producer
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_jobs.contracts.reasons import DUPLICATE_VIEW, ERROR
from spark_jobs.contracts.tables import (
    ORPHAN_ENGAGEMENTS,
    TABLE_ORPHAN_ENGAGEMENTS,
    TABLE_TRAINING_SAMPLES,
    TRAINING_SAMPLES,
    training_samples,
)
from spark_jobs.contracts.topics import TOPIC_ENGAGEMENTS, TOPIC_TRAINING_SAMPLES, TOPIC_VIEWS
from spark_jobs.samples.core.joiner import JoinParameters
from spark_jobs.samples.encoding.sample_avro import SampleEncoder
from spark_jobs.samples.encoding.schema_ids import schema_ids
from spark_jobs.samples.jobs.sample_topic import publish_samples
from spark_jobs.samples.processors.dedup_processor import (
    VIEW_ID,
    VIEW_KEY,
    ViewDedupProcessor,
    view_key,
)
from spark_jobs.samples.processors.join_processor import (
    KIND_ORPHAN,
    KIND_SAMPLE,
    SampleJoinProcessor,
)
from spark_jobs.settings import ConfigError, Settings
from spark_jobs.streaming.batch_outputs import BatchSink, linger, rows_of_kind
from spark_jobs.streaming.drops import note_batch
from spark_jobs.streaming.event_time import with_event_time
from spark_jobs.streaming.kafka.producer import make_producer
from spark_jobs.streaming.kafka.replay_fence import ReplayFence
from spark_jobs.streaming.kafka.source import read_topic
from spark_jobs.streaming.lake.dead_letters import (
    DEAD_LETTER_COLUMNS,
    DROPPED_COLUMN,
    KIND_DEAD,
    KIND_DROPPED,
)
from spark_jobs.streaming.lake.delta import insert_new_once, table_exists
from spark_jobs.streaming.worker_warmup import ARROW, STATE

NAME = "training_samples"
SAMPLE_FIELDS = TRAINING_SAMPLES.column_names
# What makes a sample "already in the table": its id and its view's event time. The same view
# delivered again has both; the ts lets the insert read only the table's newest files, where
# matching on sample_id alone read the whole table at every batch (a second per 2M samples,
# growing without end). A view_id sent again after samples.dedup_ttl with another ts is a new
# view (CONTRACTS section 9), and its sample is kept, as on the topic.
SAMPLE_IDENTITY = (*TRAINING_SAMPLES.primary_key, "ts")
ORPHAN_SCHEMA = ORPHAN_ENGAGEMENTS.arrow_schema()
METRICS = "training_samples"  # name of the observed metrics in the query progress
ORIGIN_FIELDS = ("topic", "partition", "offset", "kafka_timestamp", "key")


def join_parameters(settings: Settings) -> JoinParameters:
    return JoinParameters(settings.samples.window_ms, settings.samples.signals)


def _counted(kind: str) -> F.Column:
    return F.sum(F.when(F.col("kind") == kind, 1).otherwise(0)).alias(kind + "s")


def build(spark: SparkSession, settings: Settings) -> DataFrame:
    """Both topics through one source, the watermark on ts, one stateful step by view_id
    (de-duplication) then one by user (the join), both bucketed (jobs.state_buckets, fixed
    by the checkpoint), and per-batch counts (samples, orphans, dead letters, duplicate
    views) in the query progress."""
    samples = settings.samples
    # user_id, ts and view_id as the parsers read them (integers, a string), by the source
    # (streaming/kafka/json_fields.py): get_json_object was 28 % of the JVM's time here
    raw = read_topic(
        spark, settings.kafka, (TOPIC_VIEWS, TOPIC_ENGAGEMENTS),
        max_records_per_trigger=settings.jobs.max_records_per_trigger,
        idle_timeout_ms=settings.jobs.idle_timeout_ms,
        max_message_bytes=settings.jobs.max_message_bytes,
        json_longs=["user_id", "ts"], json_strings=[VIEW_ID], available_now_in_one_plan=True,
    )
    # only records that can be keyed move event time: one that cannot be used must not be
    # able to push the watermark (and make everything else late)
    ts = F.when(F.col("user_id").isNotNull(), F.col("ts"))
    timed = with_event_time(raw, ts, samples.lateness_ms,
                            max_clock_skew_ms=settings.jobs.max_clock_skew_ms).drop("ts")
    keyed = timed.withColumn(VIEW_KEY, view_key(F.col("kafka_topic"), F.col(VIEW_ID))
                             ).drop(VIEW_ID)
    buckets = settings.jobs.state_buckets
    deduped = ViewDedupProcessor(keyed.drop(VIEW_KEY).schema, samples.dedup_ttl_ms,
                                 settings.jobs.max_message_bytes).apply(keyed, buckets)
    joined = SampleJoinProcessor(join_parameters(settings), settings.jobs.max_message_bytes
                                 ).apply(deduped, buckets)
    duplicate = (F.col("kind") == KIND_DROPPED) & (F.col("reason") == DUPLICATE_VIEW)
    return joined.observe(
        METRICS,
        _counted(KIND_SAMPLE), _counted(KIND_ORPHAN), _counted(KIND_DEAD),
        F.coalesce(F.sum(F.when(duplicate, F.col(DROPPED_COLUMN))), F.lit(0))
        .alias("duplicate_views"),
    )


@dataclass
class SampleBatch:
    """A batch's outputs, its samples in publishing order (by user, then ts), where each
    sample's view came from (same order), and the dead rows of samples the broker refused."""

    table: pa.Table
    samples: pa.Table
    origins: pa.Table
    refused: list[dict[str, Any]] = field(default_factory=list)


class TrainingSamplesSink(BatchSink[SampleBatch]):
    """foreachBatch: samples to the topic (Avro, keyed by user_id, in ts order per user),
    dead letters, orphans, then the samples into `training_samples`, whose commit marks the
    batch done for a replay."""

    marker = TABLE_TRAINING_SAMPLES

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings, NAME)
        samples = settings.samples
        self.encoder = SampleEncoder(samples.signals, defaults={"window_ms": samples.window_ms},
                                     ids=schema_ids(settings.kafka))
        self.schema = training_samples(samples.signals).arrow_schema()
        self._check_table_labels()
        self._producer: Producer | None = None
        self.fence = ReplayFence(settings.kafka, lambda: self.outputs.app_id)

    def deliver(self, collected: SampleBatch, batch_id: int) -> None:
        """Fenced publishing (streaming/kafka/replay_fence.py): a batch replayed after a
        crash does not publish its samples twice."""
        self.fence.begin(batch_id)
        super().deliver(collected, batch_id)
        if collected.refused:  # counted after publishing, when they are known
            note_batch(NAME, batch_id, self.drop_counts(collected))

    def _check_table_labels(self) -> None:
        """Fail at start, not at the first merge, when the table was written with other
        signals: changing samples.signals needs a new table (or a migration)."""
        uri = self.outputs.table_uri(TABLE_TRAINING_SAMPLES)
        if not table_exists(uri):
            return
        stored = pa.schema(DeltaTable(uri).schema().to_arrow())
        labels = stored.field("labels").type if "labels" in stored.names else None
        names = tuple(f.name for f in labels) if isinstance(labels, pa.StructType) else ()
        if names != self.settings.samples.signals:
            raise ConfigError(
                f"samples.signals {list(self.settings.samples.signals)} differ from the labels "
                f"of the existing table {uri} {list(names)}: restore the signals, or move that "
                f"table (and the job's checkpoint) aside to start a new one"
            )

    def warm(self) -> None:
        """The samples' own producer (see BatchSink.warm)."""
        _ = self.producer

    @property
    def producer(self) -> Producer:
        if self._producer is None:
            self._producer = make_producer(
                self.settings.kafka, **{"compression.type": self.settings.samples.compression},
                **linger(self.producer_linger_ms))
        return self._producer

    def collect(self, batch: DataFrame) -> SampleBatch:
        return self.batch_of(super().collect(batch))

    def batch_of(self, table: pa.Table) -> SampleBatch:
        """The processor's rows of a batch as the sink uses them."""
        ordered = rows_of_kind(table, KIND_SAMPLE).sort_by(
            [("user_id", "ascending"), ("ts", "ascending"), ("sample_id", "ascending")])
        return SampleBatch(table, ordered.select(list(SAMPLE_FIELDS)),
                           ordered.select(list(ORIGIN_FIELDS)))

    def output_table(self, collected: SampleBatch) -> pa.Table:
        return collected.table

    def publish(self, collected: SampleBatch) -> None:
        """Avro samples keyed by user_id: one consumer sees all of a user's samples in order.
        A sample the broker refuses for good is dead-lettered (`error`) at its view."""
        samples = collected.samples
        if samples.num_rows == 0:
            return
        values = self.encoder.encode_table(samples)
        keys = [str(user) for user in samples["user_id"].to_pylist()]
        refused = publish_samples(self.producer, TOPIC_TRAINING_SAMPLES, keys, values,
                                  self.fence)
        origins = collected.origins.to_pylist() if refused else []
        collected.refused = [
            _refused(origins[index], keys[index], values[index], error)
            for index, error in refused]

    def dead_rows(self, collected: SampleBatch) -> pa.Table:
        """The processor's dead letters, and the samples the broker refused (their message
        as the raw bytes, so `raw_value` is binary then)."""
        dead = super().dead_rows(collected.table)
        if not collected.refused:
            return dead
        dead = dead.select(list(DEAD_LETTER_COLUMNS))
        dead = dead.set_column(dead.schema.get_field_index("raw_value"), "raw_value",
                               dead["raw_value"].cast(pa.binary()))
        return pa.concat_tables([dead, pa.Table.from_pylist(collected.refused, dead.schema)])


    def commit(self, collected: SampleBatch, batch_id: int) -> None:
        table = collected.table
        orphans = rows_of_kind(table, KIND_ORPHAN)
        if orphans.num_rows:
            self.outputs.append(TABLE_ORPHAN_ENGAGEMENTS,
                                orphans.select(ORPHAN_SCHEMA.names).cast(ORPHAN_SCHEMA), batch_id)
        if table.num_rows:  # a batch without outputs needs no marker: its replay sends nothing
            insert_new_once(self.outputs.table_uri(TABLE_TRAINING_SAMPLES),
                            collected.samples.cast(self.schema), SAMPLE_IDENTITY,
                            self.outputs.app_id, batch_id, tables=self.outputs.tables)

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(30)
            self._producer = None
        super().close()


def _refused(origin: dict[str, Any], key: str, value: bytes, error: str) -> dict[str, Any]:
    """The dead letter of a sample the broker refused: the message it was, and its view."""
    view = f"{origin['topic']}/{origin['partition']}/{origin['offset']}"
    return {"topic": TOPIC_TRAINING_SAMPLES, "partition": None, "offset": None,
            "kafka_timestamp": None, "key": key, "raw_value": value, "reason": ERROR,
            "detail": f"the sample of the view at {view} was not published: {error}"}


def python_daemons(settings: Settings) -> tuple[str, ...]:
    """The source and the join run in Python workers, the de-duplication in transformWithState
    ones, needed in that order (streaming/worker_warmup.py)."""
    return (ARROW, STATE)


def sink(spark: SparkSession, settings: Settings) -> TrainingSamplesSink:
    return TrainingSamplesSink(settings)
