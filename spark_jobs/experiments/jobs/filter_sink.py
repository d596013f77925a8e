"""The sink of both filter jobs: accepted rows to their topic, rejected and late ones to dead
letters, then the accepted rows into the job's raw table, whose commit marks the batch done
for a replay (the daily recomputation reads that table). The topic is fenced (see
streaming/kafka/replay_fence.py): a batch replayed after a crash is not published twice.

After a checkpoint reset the job replays its topic from the start under a new lineage: the
records an earlier lineage already delivered (up to the raw table's and the dead letters'
offsets, see replay_guard.py) are not published, dead-lettered or recorded again, so neither
the raw table nor the dead letters nor the filtered topic get them twice.
"""

from __future__ import annotations

from typing import ClassVar

import pyarrow as pa
import pyarrow.compute as pc

from spark_jobs.contracts.reasons import MALFORMED
from spark_jobs.contracts.tables import TABLE_DEAD_LETTERS
from spark_jobs.settings import Settings
from spark_jobs.streaming.batch_outputs import BatchSink, json_values, rows_of_kind
from spark_jobs.streaming.kafka.replay_fence import ReplayFence
from spark_jobs.streaming.lake.dead_letters import KIND_DEAD
from spark_jobs.streaming.lake.replay_guard import DeliveredOffsets

KIND_OK = "ok"


class FilterSink(BatchSink[pa.Table]):
    """A filter job's sink; `marker` is its raw table, with `raw_schema`."""

    topic: ClassVar[str]
    fields: ClassVar[tuple[str, ...]]  # the stripped record published to `topic`
    raw_schema: ClassVar[pa.Schema]
    # a filter's malformed rows are the source's undecodable records, with its raw text
    source_text_reasons = frozenset({MALFORMED})
    _delivered: dict[str, DeliveredOffsets] | None = None

    def delivered(self) -> dict[str, DeliveredOffsets]:
        """Per output kind, what earlier runs delivered (read once, at the first batch)."""
        if self._delivered is None:
            self._delivered = {
                KIND_OK: DeliveredOffsets.of_table(self.outputs.table_uri(self.marker)),
                KIND_DEAD: DeliveredOffsets.of_table(
                    self.outputs.table_uri(TABLE_DEAD_LETTERS),
                    filters=[("job", "=", self.outputs.job)]),
            }
        return self._delivered

    def __init__(self, settings: Settings, job: str) -> None:
        super().__init__(settings, job)
        self.fence = ReplayFence(settings.kafka, lambda: self.outputs.app_id)

    def deliver(self, collected: pa.Table, batch_id: int) -> None:
        self.fence.begin(batch_id)
        parts = [guard.undelivered(rows_of_kind(collected, kind))
                 for kind, guard in self.delivered().items()]
        others = collected.filter(pc.invert(pc.is_in(collected["kind"],
                                                     pa.array(list(self.delivered())))))
        super().deliver(pa.concat_tables([*parts, others]), batch_id)

    def publish(self, table: pa.Table) -> None:
        """The accepted rows in event-time order, keyed by user_id."""
        accepted = rows_of_kind(table, KIND_OK).sort_by([("ts", "ascending")])
        keys = [str(user) for user in accepted["user_id"].to_pylist()]
        self.fence.produce(self.outputs.producer, self.topic, keys,
                           json_values(accepted, self.fields))

    def commit(self, table: pa.Table, batch_id: int) -> None:
        accepted = rows_of_kind(table, KIND_OK)
        if accepted.num_rows:  # an empty batch needs no commit: its replay writes nothing
            raw = accepted.select(list(self.raw_schema.names)).cast(self.raw_schema)
            self.outputs.append(self.marker, raw, batch_id)
