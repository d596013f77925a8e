"""Outputs an earlier checkpoint lineage already delivered: not delivered again on a replay.

A checkpoint reset restarts a job's query from the topics' start under a new lineage (a new
app id, see checkpoint.py), so no batch is skipped as "already committed" and the stateful
steps rebuild their state from the whole topic. Outputs made per source record would then be
written a second time. A table that records its rows with their source's Kafka coordinates
tells, per topic partition, the highest offset already delivered: every record of that
partition up to it went through a committed batch (a batch is a contiguous offset range,
batches commit in order, and that table's commit comes after the batch's other outputs), so
rows at or below it are dropped from what the replay delivers. Read once per process: what
the running process writes lies above it, and a same-lineage replay of an uncommitted batch
lies above it too.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from spark_jobs.streaming.lake.delta import read_arrow, table_exists

Partition = tuple[str, int]
COORDINATES = ["topic", "partition", "offset"]


class DeliveredOffsets:
    """The highest delivered offset per (topic, partition) of one table (or a slice of it)."""

    def __init__(self, highest: dict[Partition, int]) -> None:
        self.highest = highest

    @classmethod
    def of_table(cls, table_uri: str, filters: Any = None) -> DeliveredOffsets:
        """From the table's rows (`filters`: e.g. one job's dead letters); none without table."""
        if not table_exists(table_uri):
            return cls({})
        rows = read_arrow(table_uri, columns=COORDINATES, filters=filters)
        rows = rows.filter(pc.is_valid(rows["offset"]))
        maxima = rows.group_by(["topic", "partition"], use_threads=False).aggregate(
            [("offset", "max")])
        return cls({(r["topic"], r["partition"]): r["offset_max"] for r in maxima.to_pylist()})

    def delivered(self, rows: pa.Table) -> pa.Array:
        """True for each row (with COORDINATES) at or below its partition's delivered offset."""
        done = pa.array([False] * rows.num_rows)
        for (topic, partition), offset in self.highest.items():
            here = pc.and_(pc.equal(rows["topic"], topic), pc.equal(rows["partition"], partition))
            done = pc.or_(done, pc.and_(here, pc.less_equal(rows["offset"], offset)))
        return pc.fill_null(done, False)

    def undelivered(self, rows: pa.Table) -> pa.Table:
        if not self.highest or rows.num_rows == 0:
            return rows
        return rows.filter(pc.invert(self.delivered(rows)))
