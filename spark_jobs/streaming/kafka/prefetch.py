"""The prefetching reader of `tideline_kafka` (option `prefetch=true`), for low-latency jobs.

A plain Python streaming source plans offset ranges on the driver, then Spark runs a task per
range in a Python worker that fetches the records again: a fixed cost per micro-batch before
any record is read (task scheduling, the worker round trip, Arrow back to the JVM), the
largest single cost of the fraud job's batch. The planner process already tails every
partition (kafka/tail_index.py); here it also keeps the records, and Spark's "simple" reader
protocol lets the planner hand a batch's records to the JVM with the plan: one read on the
driver, no task in a Python worker, a much shorter batch (BENCHMARKS.md, 2026-11-23).

Same offsets, limits, event-time alignment and exactly-once as the ranged reader: `read`
plans with the same planner, then takes each range's records from the tail index, or fetches
them exactly when the index does not hold them all (first batches, a backlog older than the
index). A restarted query replays its uncommitted batch with `readBetweenOffsets`, an exact
read of the planned ranges. The cost: every record passes through one Python process, so
this suits a job that wants latency, not the highest throughput.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import SimpleDataSourceStreamReader
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from spark_jobs.streaming.kafka.decoding import decoded_batches
from spark_jobs.streaming.kafka.options import SourceOptions
from spark_jobs.streaming.kafka.range_reader import read_range
from spark_jobs.streaming.kafka.ranges import KafkaRange
from spark_jobs.streaming.kafka.stream_reader import TidelineKafkaStreamReader


class TidelineKafkaPrefetchReader(SimpleDataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans like TidelineKafkaStreamReader and returns each batch's records with its end."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.planner = TidelineKafkaStreamReader(options, keep_records=True)

    def initialOffset(self) -> dict[str, int]:
        return self.planner.initialOffset()

    def prepareForTriggerAvailableNow(self) -> None:
        self.planner.prepareForTriggerAvailableNow()

    def read(self, start: dict[str, int]) -> tuple[Iterator[pa.RecordBatch], dict[str, int]]:
        """The next batch from `start`: its records and its end (the planner's latestOffset)."""
        planner = self.planner
        planner.release_records(start)  # read before, or replayed exactly after a restart
        end = planner.latestOffset(start, planner.getDefaultReadLimit())
        batches = [batch for part in planner.partitions(start, end)
                   for batch in self._records(part)]
        return iter(batches), end

    def _records(self, part: KafkaRange) -> Iterator[pa.RecordBatch]:
        kept = self.planner.kept_records(part)
        if kept is None:
            return read_range(self.options, part)
        return decoded_batches(self.options, part, kept)

    def readBetweenOffsets(
        self, start: dict[str, int], end: dict[str, int]
    ) -> Iterator[pa.RecordBatch]:
        """A batch planned before a restart, read exactly (in a Python worker)."""
        for part in self.planner.partitions(start, end):
            yield from read_range(self.options, part)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to do: progress lives in Spark's checkpoint, never in Kafka."""
