"""fraud_rules with `fraud.state: driver`: long-lived engines kept by the micro-batch sink.

The transformWithState path pays a socket round trip to the JVM for every state read and write
(dozens per transaction) and a RocksDB commit per batch, which bound its throughput and its
batch cycle far below the engine's own speed. Here the query is stateless (source, event-time
watermark, foreachBatch) and the engines keep their state in memory between batches: the rules
are split over `fraud.shards` engines (fraud.core.rule_routing), each in a process of its own
(engine_process; a single shard stays in the driver's), so that a batch is evaluated on every
core of the driver's machine at once while the driver's Python reads the next batch and
publishes (numbers in BENCHMARKS.md, issues 5 and 15). Durability comes from the query's
checkpoint: each engine writes its batch's state changes there before the batch's
`fraud_alerts` commit, and a snapshot now and then, when the change files outweigh it
(engine_host); a restarted job rebuilds the state of the last committed batch and Spark
replays the next one.
A batch is evaluated and delivered in the background while Spark commits it and reads and
plans the next one, so the engines and the JVM work at the same time; the batch's input is
first written ahead in the checkpoint (inputs_ahead), and a restarted sink delivers what is
still there before its first new batch. The next batch waits for the one before, so batches
still go through the engines one at a time, in order. A batch's drop counts reach the
progress report with the next batch's, and those of the last batch reach the totals when
the sink closes.
The trade-off: state must fit in the driver machine's memory, and evaluation scales to its
cores, not to the cluster's.
Outputs, ordering and exactly-once are the same as the sharded path's (same engine, same
arrival order, the same watermark from the offset log, the same sink), and so is hostile input
(CONTRACTS section 9): a transaction too far ahead of its Kafka time (FUTURE_COLUMN) is a
`future` dead letter that never reaches the engine, every message goes through the engine
isolated (fraud.core.isolation), and an alert the topic refuses becomes a dead letter.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame

from spark_jobs.contracts.topics import TOPIC_FRAUD_ALERTS
from spark_jobs.fraud.core.output_rows import (
    OFFSET,
    OUTPUT_NAMES,
    PARTITION,
    RULE_ID,
    TOPIC,
    TRANSACTION_ID,
    VALUE,
)
from spark_jobs.fraud.jobs.alerts_sink import NAME, FraudAlertsSink, alert_key, refused_row
from spark_jobs.fraud.jobs.engine_host import EngineHost, HostSpec
from spark_jobs.fraud.jobs.engine_process import EngineProcess, EngineProcessError
from spark_jobs.fraud.jobs.engine_state_files import EngineStateFiles
from spark_jobs.fraud.jobs.inputs_ahead import InputsAhead
from spark_jobs.fraud.jobs.publishing import RefusingPublisher
from spark_jobs.fraud.processors.resident import settle_garbage_collector
from spark_jobs.settings import Settings
from spark_jobs.streaming.checkpoint import batch_watermark_ms, last_committed_batch, query_id
from spark_jobs.streaming.drops import add_late, note_batch, take_untaken
from spark_jobs.streaming.kafka.replay_fence import key_only

T = TypeVar("T")
LOG = logging.getLogger("tideline.fraud")


class FraudDriverSink(FraudAlertsSink):
    """foreachBatch: the batch's rules and transactions through the engines of every shard,
    then the outputs as the sharded path publishes them."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.checkpoint = settings.lake.checkpoint(NAME)
        self._local: EngineHost | None = None  # the engine of a single shard
        self._others: list[EngineProcess] = []  # those of several shards, one each
        self._started = False
        self._applied: int | None = None  # the batch every engine's state is the state after
        self._sent_alerts: RefusingPublisher | None = None  # of the batch being delivered
        self._ahead: InputsAhead | None = None
        self._background = ThreadPoolExecutor(1, thread_name_prefix="fraud-batch")
        self._running: Future[None] | None = None  # the batch in the background
        self._caught_up = False  # every batch written ahead before this process's is delivered

    def _start_engines(self) -> None:
        """Start every shard's engine (all or none): one shard in this process; several each
        in a process of its own, so that no evaluation shares the GIL with the thread that
        reads the next batch from the JVM and publishes this one's alerts (BENCHMARKS.md,
        2026-11-29 sixth session). A checkpoint split differently fails here."""
        if self._started:
            return
        specs = [HostSpec.of(self.settings, self.checkpoint, shard)
                 for shard in range(self.settings.fraud.shards)]
        if len(specs) == 1:
            self._local = EngineHost(specs[0])  # checks the shards the checkpoint holds
            self._started = True
            return
        EngineStateFiles(self.checkpoint, 0).pin_shards(len(specs))
        others: list[EngineProcess] = []
        try:
            for spec in specs:
                others.append(EngineProcess(spec))
            for other in others:  # started at once, then awaited: a failure fails the start
                other.started()
        except BaseException:
            for other in others:
                other.close()
            raise
        self._others, self._started = others, True

    def warm(self) -> None:
        """Also start the shards' engines, so that their start-up overlaps the query's (and
        a checkpoint split differently fails at start), and deliver the batches Spark
        committed that the last run left written ahead: now, not when (or if) new data makes
        a batch."""
        super().warm()
        self._start_engines()
        committed = last_committed_batch(self.checkpoint)
        if committed is not None:
            self._catch_up(before=committed + 1)

    def _together(self, run_here: Callable[[EngineHost], T], method: str, *args: object
                  ) -> tuple[T | None, list[Any]]:
        """`method(*args)` in every engine process while `run_here(engine)` runs on the
        engine in this process, if any; every call begun is answered before this returns or
        raises (the first error raised)."""
        self._start_engines()
        begun: list[EngineProcess] = []
        try:
            for other in self._others:
                other.begin(method, *args)
                begun.append(other)
            mine = None if self._local is None else run_here(self._local)
        except BaseException:
            for other in begun:
                with contextlib.suppress(EngineProcessError):
                    other.end()
            raise
        theirs, failure = [], None
        for other in begun:
            try:
                theirs.append(other.end())
            except EngineProcessError as exc:
                failure = failure or exc
        if failure is not None:
            raise failure
        return mine, theirs

    def _on_every_shard(self, method: str, *args: object) -> None:
        """The same call on every engine, at once."""
        self._together(lambda engine: getattr(engine, method)(*args), method, *args)

    @property
    def ahead(self) -> InputsAhead:
        if self._ahead is None:
            self._ahead = InputsAhead(self.checkpoint)
        return self._ahead

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        """Write the batch ahead, then evaluate and deliver it in the background (after the
        batch before it, and after a restart every batch still written ahead)."""
        table = batch.toArrow()
        self._settle()
        if not self._caught_up:  # a new process, or the query again after a failed batch
            self._catch_up(before=batch_id)
        self.ahead.write(batch_id, table)
        self._running = self._background.submit(self._deliver_ahead, batch_id, table)
        self._running.add_done_callback(_log_failure)

    def _catch_up(self, before: int) -> None:
        """Deliver, in order, every batch still written ahead below `before`."""
        for waiting in self.ahead.waiting(before=before):
            self._deliver_ahead(waiting, self.ahead.read(waiting))
        self._caught_up = True

    def _settle(self) -> None:
        """Wait for the batch in the background; its failure is raised here (and the batch,
        still written ahead, is delivered again before the next one, through the fence)."""
        running, self._running = self._running, None
        if running is None:
            return
        try:
            running.result()
        except BaseException:
            self._caught_up = False
            self.fence.recheck()
            raise

    def _deliver_ahead(self, batch_id: int, table: pa.Table) -> None:
        self.evaluate_and_deliver(batch_id, table)
        self.ahead.remove(batch_id)

    def evaluate_and_deliver(self, batch_id: int, table: pa.Table) -> None:
        """The batch through every shard's engine, then its outputs published and committed
        (a batch `fraud_alerts` already holds only brings the engines' state after it)."""
        # Only the first batch of a process can be a replay (a failed batch ends the query),
        # so the table's log is read for it alone, not on every batch of the hot path.
        continuing = self._applied == batch_id - 1
        if not continuing and self.outputs.committed(self.marker, batch_id):
            self._on_every_shard("restore", batch_id)  # its change files precede that commit
            self._applied = batch_id
            return
        if not continuing:
            self._on_every_shard("restore", batch_id - 1)
        if batch_id > 0:
            self._on_every_shard("maybe_snapshot", batch_id - 1)  # committed before this one
        watermark = batch_watermark_ms(self.checkpoint, batch_id)
        now_ms = int(time.time() * 1000)
        self.fence.begin(batch_id)
        alerts = RefusingPublisher(self.outputs.producer, TOPIC_FRAUD_ALERTS, self.fence, key_only)
        self._applied = None  # memory moves ahead of the files, also if evaluation fails
        mine, theirs = self._together(
            lambda engine: engine.evaluate(batch_id, table, watermark, now_ms,
                                           partial(publish_found, alerts)),
            "evaluate", batch_id, table, watermark, now_ms)
        outputs = pa.concat_tables([*([] if mine is None else [mine]),
                                    *(_published(t, alerts) for t in theirs)])
        counts = self.drop_counts(outputs)
        self._sent_alerts = alerts
        self.deliver(outputs, batch_id)
        # counted once delivered: Spark may have reported the batch already, and a delivery
        # that fails is done again (and counted then) by the next start
        note_batch(self.outputs.job, batch_id, counts)
        settle_garbage_collector(batch_id)

    def publish_alerts(self, alerts: pa.Table) -> None:
        """The alerts went out as they were found (in this order): await their delivery."""
        assert self._sent_alerts is not None
        self.set_aside(TOPIC_FRAUD_ALERTS, alerts, self._sent_alerts.flush())

    def commit(self, table: pa.Table, batch_id: int) -> None:
        """Every engine's state changes first: once `fraud_alerts` says the batch is done, a
        restart rebuilds the state after it from the files."""
        self._on_every_shard("write_changes", batch_id)
        self._applied = batch_id
        super().commit(table, batch_id)
        if self._local is not None:  # an engine process tidies once it wrote its changes
            self._local.tidy()

    def close(self) -> None:
        """Deliver the batch in the background, count its drops, then stop the engine
        processes and let snapshots in flight finish (and publish them). A batch that fails
        here stays written ahead: the next start delivers it; its error is raised once
        everything is closed."""
        failure: BaseException | None = None
        try:
            self._settle()
        except BaseException as exc:
            failure = exc
        try:
            self._count_late_drops()
        finally:
            self._background.shutdown()
            for other in self._others:
                other.close()
            if self._local is not None:
                self._local.close()
            super().close()
        if failure is not None:
            raise failure

    def _count_late_drops(self) -> None:
        """The drop counts Spark's progress report no longer takes (the last batch's) go to
        the job's totals (streaming/drops.py)."""
        untaken = take_untaken(self.outputs.job)
        if not untaken:
            return
        from spark_jobs.streaming.progress import progress_dir  # the listener's folder

        lineage = query_id(self.checkpoint)
        for batch_id, counts in sorted(untaken.items()):
            add_late(progress_dir(self.settings), self.outputs.job, lineage, batch_id, counts)


def _log_failure(running: Future[None]) -> None:
    """Say at once that a batch failed in the background (raised at the next batch or at
    close, which may be long on a quiet stream)."""
    failure = running.exception()
    if failure is not None:
        LOG.error("a fraud_rules batch failed in the background: %s", failure)


def publish_found(alerts: RefusingPublisher, rows: list[tuple[Any, ...]], index: int) -> None:
    """Send the alert row `rows[index]` (output_values); a refused one becomes its `error`
    dead letter."""
    row = rows[index]
    error = _send(alerts, row[VALUE], row[RULE_ID], row[TRANSACTION_ID], row[TOPIC],
                  row[PARTITION], row[OFFSET])
    if error is not None:
        refused = refused_row(dict(zip(OUTPUT_NAMES, row, strict=True)), alerts.topic, error)
        rows[index] = tuple(refused[name] for name in OUTPUT_NAMES)


def _send(alerts: RefusingPublisher, value: str, rule_id: int | None,
          transaction_id: str | None, topic: str, partition: int, offset: int) -> str | None:
    """One alert to its topic; the error text when the topic refuses it at once."""
    return alerts.send(alert_key(rule_id, transaction_id), value,
                       (topic, partition, offset, rule_id))


_SENT = ("value", "rule_id", "transaction_id", "topic", "partition", "offset")


def _published(outputs: pa.Table, alerts: RefusingPublisher) -> pa.Table:
    """An engine process's outputs, its alerts sent as a single shard's are as found. Read
    by column, the alerts' only: rows as dicts each way cost ~3 µs an alert (a long run
    emits thousands a second); the table is rebuilt only around a refused alert (rare)."""
    is_alert = pc.equal(outputs["kind"], "alert")
    if not pc.any(is_alert).as_py():
        return outputs
    positions = pc.indices_nonzero(is_alert)
    sent = outputs.select(list(_SENT)).take(positions)
    refused: dict[int, str] = {}
    for position, *fields in zip(positions.to_pylist(), *(sent[n].to_pylist() for n in _SENT),
                                 strict=True):
        error = _send(alerts, *fields)
        if error is not None:
            refused[position] = error
    if not refused:
        return outputs
    rows = outputs.to_pylist()
    for position, error in refused.items():
        rows[position] = refused_row(rows[position], alerts.topic, error)
    return pa.Table.from_pylist(rows, schema=outputs.schema)
