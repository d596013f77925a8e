"""Driver-side micro-batch outputs shared by the jobs: Kafka topics, Delta tables, dead letters,
and BatchSink, the one shape of a job's sink over them.

A batch is collected once as Arrow and fanned out. Exactly-once comes from the Delta app
transaction (job name and checkpoint lineage, batch id); the Kafka side is at-least-once with
an idempotent producer, and the consumers downstream de-duplicate a replayed batch. Records
are produced in event-time order so a topic written from one batch is no more out of order
than its input.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar, cast

import orjson
import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Producer

from spark_jobs.catalog import job as catalog_job
from spark_jobs.contracts.tables import TABLE_DEAD_LETTERS
from spark_jobs.settings import Settings
from spark_jobs.streaming.checkpoint import query_id
from spark_jobs.streaming.drops import note_batch
from spark_jobs.streaming.kafka.decoding import received_whole
from spark_jobs.streaming.kafka.evidence import Coordinate, fetch_values
from spark_jobs.streaming.kafka.producer import make_producer, produce_all
from spark_jobs.streaming.lake.dead_letters import (
    DROPPED_COLUMN,
    KIND_DEAD,
    KIND_DROPPED,
    dead_letter_table,
)
from spark_jobs.streaming.lake.delta import (
    OpenTables,
    append_once,
    compact,
    transaction_version,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)
BATCHED_LINGER_MS = 1_000


def linger(linger_ms: int | None) -> dict[str, int]:
    """Producer settings for a linger (none: the project default)."""
    return {} if linger_ms is None else {"linger.ms": linger_ms}
Collected = TypeVar("Collected")


def rows_of_kind(table: pa.Table, kind: str) -> pa.Table:
    """The rows of a processor's output whose `kind` column equals `kind`."""
    return table.filter(pc.equal(table["kind"], kind))


def json_values(table: pa.Table, fields: Sequence[str]) -> list[bytes]:
    """One compact JSON object per row with exactly `fields` (the stripped record)."""
    columns = [table[name].to_pylist() for name in fields]
    rows = zip(*columns, strict=True)
    return [orjson.dumps(dict(zip(fields, values, strict=True))) for values in rows]


class BatchOutputs:
    """The outputs of one job; the producer lives as long as the job's process."""

    def __init__(self, settings: Settings, job: str, linger_ms: int | None = None) -> None:
        self.settings = settings
        self.job = job
        self.linger_ms = linger_ms
        self._producer: Producer | None = None
        self._app_id: str | None = None
        self._compactor: threading.Thread | None = None
        # kept between batches: each write reads new commits only, and the log stays short
        self._tables = OpenTables(settings.maintenance.log_retention_ms)

    @property
    def app_id(self) -> str:
        """Delta app-transaction id: the job and its checkpoint lineage (see checkpoint.py)."""
        if self._app_id is None:
            lineage = query_id(self.settings.lake.checkpoint(self.job))
            self._app_id = f"{self.job}@{lineage}"
        return self._app_id

    @property
    def producer(self) -> Producer:
        if self._producer is None:
            self._producer = make_producer(self.settings.kafka, **linger(self.linger_ms))
        return self._producer

    @property
    def tables(self) -> OpenTables:
        """The job's Delta tables, kept open between its batches (one sink's, one thread)."""
        return self._tables

    def table_uri(self, name: str) -> str:
        return self.settings.lake.table(name)

    def committed(self, table: str, batch_id: int) -> bool:
        """True when this job already committed batch_id to `table` (a replayed batch)."""
        version = transaction_version(self.table_uri(table), self.app_id)
        return version is not None and version >= batch_id

    def publish(self, topic: str, table: pa.Table, fields: Sequence[str]) -> int:
        """Produce the rows in event-time order, keyed by user_id."""
        if table.num_rows == 0:
            return 0
        ordered = table.sort_by([("ts", "ascending")])
        keys = [str(user) for user in ordered["user_id"].to_pylist()]
        return produce_all(self.producer, topic, keys, json_values(ordered, fields))

    def dead_letters(self, dead: pa.Table, batch_id: int,
                     source_text: Collection[str] = ()) -> int:
        """Append a batch's dead rows (DEAD_LETTER_COLUMNS) to `dead_letters`, once per batch.
        `source_text`: the reasons whose rows carry the source's raw text of the record;
        where that text is the whole record (decoding.received_whole) it is not read back."""
        if dead.num_rows == 0:
            return 0
        reasons = frozenset(source_text)
        rows = dead_letter_table(
            self.job, dead, raw_lookup=self.read_back,
            holds_received=lambda reason, text: reason in reasons and received_whole(text))
        append_once(self.table_uri(TABLE_DEAD_LETTERS), rows, self.app_id, batch_id,
                    merge_schema=True, tables=self._tables)
        return dead.num_rows

    def read_back(self, places: list[Coordinate]) -> dict[Coordinate, bytes | None]:
        """The received bytes of dead-lettered records (the evidence), by coordinates."""
        return fetch_values(self.settings.kafka, places)

    def append(self, table_name: str, data: pa.Table, batch_id: int) -> bool:
        return append_once(self.table_uri(table_name), data, self.app_id, batch_id,
                           tables=self._tables)

    def maybe_compact(self, batch_id: int, tables: Sequence[str], background: bool = False
                      ) -> None:
        """Compact this job's tables every `jobs.compact_every_batches` batches; in a
        background thread when asked (a latency-bound job must not stall a batch for it;
        its appends retry on the compaction's commit)."""
        every = self.settings.jobs.compact_every_batches
        if batch_id == 0 or batch_id % every:
            return
        if not background:
            self._compact(tables)
        elif self._compactor is None or not self._compactor.is_alive():
            self._compactor = threading.Thread(target=self._compact, args=(list(tables),),
                                               name=f"{self.job}-compaction", daemon=True)
            self._compactor.start()

    def _compact(self, tables: Sequence[str]) -> None:
        for name in tables:
            try:
                compact(self.table_uri(name))
            except Exception as exc:  # compaction is an optimisation; a conflict must not kill
                log.warning("compaction of %s failed: %s", name, exc)

    def close(self) -> None:
        if self._compactor is not None:
            self._compactor.join(timeout=120)
        if self._producer is not None:
            self._producer.flush(30)
            self._producer = None


class BatchSink(Generic[Collected]):
    """The one shape of a job's foreachBatch sink: run the batch's plan, skip a batch already
    committed (a replay), else publish to topics, append dead letters, commit the job's own
    tables (the `marker` table last: its commit marks the batch done), compact now and then.

    A system's sink provides `publish`, `commit`, and where it keeps dead rows when they are
    not those of kind "dead"; the tables it compacts are its catalog entry's.
    """

    marker: ClassVar[str]  # the table whose app transaction says a batch is done
    compact_in_background: ClassVar[bool] = False  # a latency-bound job must not wait for it
    # A sink that flushes its topics once per batch lingers long: flush() sends at once anyway,
    # and one record batch per partition per micro-batch is what keeps a broker that slows
    # down with the batches a partition holds (Tansu) healthy for days. None: the default
    # (a latency-bound sink sends each record as it is found).
    producer_linger_ms: ClassVar[int | None] = BATCHED_LINGER_MS
    # The reasons whose dead rows carry the source's raw text of the record (an undecodable
    # record's `raw_value`), not a decoded form: a whole one needs no read-back from Kafka.
    source_text_reasons: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, settings: Settings, job: str) -> None:
        self.settings = settings
        self.outputs = BatchOutputs(settings, job, self.producer_linger_ms)
        self.tables = catalog_job(job).tables

    def warm(self) -> None:
        """Open, before the first batch, the producer of a job that publishes: an idempotent
        producer gets its producer id about a second after it is created, a wait its first
        flush would otherwise make. The runner calls it when it starts the query."""
        if catalog_job(self.outputs.job).outputs:
            _ = self.outputs.producer

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        collected = self.collect(batch)
        note_batch(self.outputs.job, batch_id, self.drop_counts(collected))
        if self.outputs.committed(self.marker, batch_id):
            return
        self.deliver(collected, batch_id)

    def drop_counts(self, collected: Collected) -> Counter[str]:
        """What the batch did not pass on, by reason: its dead letters, and the counts its
        processor reported (rows of kind KIND_DROPPED); see streaming/drops.py."""
        counts = Counter(reason or "unknown"
                         for reason in self.dead_rows(collected)["reason"].to_pylist())
        table = self.output_table(collected)
        if table is not None and DROPPED_COLUMN in table.column_names:
            dropped = rows_of_kind(table, KIND_DROPPED)
            for reason, n in zip(dropped["reason"].to_pylist(),
                                 dropped[DROPPED_COLUMN].to_pylist(), strict=True):
                counts[reason or "unknown"] += n or 0
        return counts

    def output_table(self, collected: Collected) -> pa.Table | None:
        """The processor's rows of the batch (with `kind`), where drop counts are found."""
        return collected if isinstance(collected, pa.Table) else None

    def collect(self, batch: DataFrame) -> Collected:
        """The batch on the driver. Runs the plan also for a replayed batch that is then
        skipped: Spark fails a stateful batch whose plan did not run (README, Platform
        findings)."""
        return cast(Collected, batch.toArrow())

    def deliver(self, collected: Collected, batch_id: int) -> None:
        self.publish(collected)
        self.outputs.dead_letters(self.dead_rows(collected), batch_id,
                                  self.source_text_reasons)
        self.commit(collected, batch_id)
        self.outputs.maybe_compact(batch_id, self.tables, background=self.compact_in_background)

    def publish(self, collected: Collected) -> None:
        """Send the batch's records to the job's topics (at least once)."""

    def dead_rows(self, collected: Collected) -> pa.Table:
        """The batch's dead letters, with DEAD_LETTER_COLUMNS."""
        return rows_of_kind(cast(pa.Table, collected), KIND_DEAD)

    def commit(self, collected: Collected, batch_id: int) -> None:
        """Write the job's own tables exactly once, the marker table last."""
        raise NotImplementedError

    def close(self) -> None:
        self.outputs.close()
