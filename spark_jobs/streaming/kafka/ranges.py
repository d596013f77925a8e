"""The unit of a `tideline_kafka` plan: offsets [start, end) of one partition, one Spark task.

The streaming planner, the prefetching reader and the batch planner all produce these ranges;
the readers read exactly them, or fail with RangeReadError rather than skip a record.
"""

from __future__ import annotations

from pyspark.sql.datasource import InputPartition


class RangeReadError(RuntimeError):
    """A planned offset range cannot be read completely (data deleted, broker gone, ...)."""


class KafkaRange(InputPartition):
    """Offsets [start, end) of one Kafka partition: one Spark task."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end
