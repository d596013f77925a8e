"""`tideline_kafka`: a PySpark Data Source reading Kafka topics with exact offsets.

Spark has no Kafka connector here (no jars can be fetched), so this source does the Kafka work
in Python. This module is its face: the DataSource Spark registers, which hands each kind of
read to its reader, and the two calls jobs use, `read_topic` (streaming) and `read_topic_batch`.

- kafka/stream_reader.py plans offset ranges on the driver (limits, event-time alignment,
  availableNow); Spark runs one task per range, read by kafka/range_reader.py.
- kafka/prefetch.py (`prefetch=true`) takes each batch's records from the planner's tail index
  instead of tasks that fetch them again: less parallel, a shorter micro-batch (BENCHMARKS.md,
  issue 5).
- kafka/batch_reader.py (`spark.read`) plans every partition's range once, optionally bounded
  by Kafka timestamps.

With `record=<spec>` values are decoded (kafka/decoding.py) and a message that does not decode
becomes an error row (reason and raw text); nothing is ever dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pyspark.errors import PySparkNotImplementedError
from pyspark.sql.datasource import DataSource, DataSourceReader, SimpleDataSourceStreamReader
from pyspark.sql.types import StructType

from spark_jobs.streaming.kafka.options import SOURCE_NAME, SourceOptions, topic_options
from spark_jobs.streaming.kafka.source_schema import source_schema

if TYPE_CHECKING:  # the readers load where they are made: Spark's planner processes load this
    # module to ask for the schema, each a fresh interpreter (Kafka client, pyarrow, settings)
    from pyspark.sql import DataFrame, SparkSession

    from spark_jobs.settings import KafkaSettings
    from spark_jobs.streaming.kafka.stream_reader import TidelineKafkaStreamReader


class TidelineKafkaSource(DataSource):
    """Options: bootstrap, topic, client (JSON), record, maxRecordsPerTrigger, startingOffsets,
    readTimeoutMs, idleTimeoutMs, prefetch, maxMessageBytes, jsonLongs, jsonStrings,
    availableNowInOnePlan; batch reads also take startingTimestamp and endingTimestamp
    (epoch ms)."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.parsed = SourceOptions.parse(options)

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        return source_schema(self.parsed.record, self.parsed.json_longs,
                             self.parsed.json_strings)

    def streamReader(self, schema: StructType) -> TidelineKafkaStreamReader:
        from spark_jobs.streaming.kafka.stream_reader import TidelineKafkaStreamReader

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
    max_message_bytes: int | None = None,
    json_longs: Sequence[str] = (),
    json_strings: Sequence[str] = (),
    available_now_in_one_plan: bool = False,
) -> DataFrame:
    """A streaming DataFrame of one or several topics read together (raw, or decoded with the
    record spec of each topic); several topics share one offset plan and one admission limit,
    so their event times advance together. A decoded message larger than `max_message_bytes`
    becomes an error row. `json_longs` and `json_strings` (raw reads): top-level integer
    and string fields of each value as long and string columns (kafka/json_fields.py).

    `available_now_in_one_plan`, for a stateful query: an available-now run whose remainder
    fits `max_records_per_trigger` reads it in one micro-batch, not one per stretch of event
    time (nothing comes after it to fall behind the watermark it moves). Spark then runs a
    batch without data, which commits that watermark. A stateless query runs none, so its
    committed watermark would stay where the run began: it keeps the batches."""
    options = SourceOptions.parse(
        {
            **topic_options(kafka, topic, record),
            "maxRecordsPerTrigger": "" if max_records_per_trigger is None else str(
                max_records_per_trigger
            ),
            "startingOffsets": starting,
            "idleTimeoutMs": "" if idle_timeout_ms is None else str(idle_timeout_ms),
            "prefetch": str(prefetch).lower(),
            "maxMessageBytes": "" if max_message_bytes is None else str(max_message_bytes),
            "jsonLongs": ",".join(json_longs),
            "jsonStrings": ",".join(json_strings),
            "availableNowInOnePlan": str(available_now_in_one_plan).lower(),
        }
    )
    register(spark)
    return spark.readStream.format(SOURCE_NAME).options(**options.as_spark_options()).load()


def read_topic_batch(
    spark: SparkSession,
    kafka: KafkaSettings,
    topic: str | Sequence[str],
    record: str | Sequence[str] | None = None,
    start_ms: int | None = None,
    end_ms: int | None = None,
    json_longs: Sequence[str] = (),
    json_strings: Sequence[str] = (),
) -> DataFrame:
    """A batch DataFrame of one or several topics, optionally bounded by Kafka timestamps
    (`json_longs`, `json_strings`: as `read_topic`)."""
    from spark_jobs.streaming.kafka.batch_reader import (
        ENDING_TIMESTAMP,
        STARTING_TIMESTAMP,
        batch_options,
    )

    options = {
        **topic_options(kafka, topic, record),
        STARTING_TIMESTAMP: "" if start_ms is None else str(start_ms),
        ENDING_TIMESTAMP: "" if end_ms is None else str(end_ms),
        "jsonLongs": ",".join(json_longs),
        "jsonStrings": ",".join(json_strings),
    }
    batch_options(options)  # fail here, with the option's name, rather than in a worker
    register(spark)
    return spark.read.format(SOURCE_NAME).options(**options).load()
