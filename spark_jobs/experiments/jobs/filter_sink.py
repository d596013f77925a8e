"""The sink of both filter jobs: accepted rows to their topic, rejected and late ones to dead
letters, then the accepted rows into the job's raw table, whose commit marks the batch done
for a replay (the daily recomputation reads that table)."""

from __future__ import annotations

from typing import ClassVar

import pyarrow as pa

from spark_jobs.streaming.batch_outputs import BatchSink, rows_of_kind

KIND_OK = "ok"


class FilterSink(BatchSink[pa.Table]):
    """A filter job's sink; `marker` is its raw table, with `raw_schema`."""

    topic: ClassVar[str]
    fields: ClassVar[tuple[str, ...]]  # the stripped record published to `topic`
    raw_schema: ClassVar[pa.Schema]

    def publish(self, table: pa.Table) -> None:
        self.outputs.publish(self.topic, rows_of_kind(table, KIND_OK), self.fields)

    def commit(self, table: pa.Table, batch_id: int) -> None:
        accepted = rows_of_kind(table, KIND_OK)
        if accepted.num_rows:  # an empty batch needs no commit: its replay writes nothing
            raw = accepted.select(list(self.raw_schema.names)).cast(self.raw_schema)
            self.outputs.append(self.marker, raw, batch_id)
