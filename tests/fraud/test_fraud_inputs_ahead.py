"""fraud's driver mode delivers a batch in the background after Spark committed it: the
batch's input written ahead in the checkpoint, delivered after a crash by the next start,
and the last batch's drop counts in the totals when the sink closes."""

from __future__ import annotations

import json
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pyarrow as pa

from spark_jobs.contracts.tables import TABLE_FRAUD_ALERTS
from spark_jobs.contracts.topics import FRAUD_TOPICS
from spark_jobs.fraud.core.output_rows import KIND_RULE, KIND_TRANSACTION
from spark_jobs.fraud.jobs.alerts_sink import NAME
from spark_jobs.fraud.jobs.fraud_driver import FraudDriverSink
from spark_jobs.fraud.jobs.inputs_ahead import InputsAhead
from spark_jobs.streaming.drops import read_totals
from spark_jobs.streaming.kafka.topic_admin import ensure_topics
from spark_jobs.streaming.lake.delta import read_arrow
from spark_jobs.streaming.progress import progress_dir
from tests.fraud.test_fraud_driver_shards import _rule, _table

T0 = 1_000_000


def test_inputs_are_kept_until_removed_and_listed_in_order(tmp_path):
    ahead = InputsAhead(str(tmp_path / "checkpoint"))
    assert ahead.waiting(before=10) == []
    tables = {batch: pa.table({"n": [batch] * batch, "text": ["x" * batch] * batch})
              for batch in (3, 12, 2)}
    for batch, table in tables.items():
        ahead.write(batch, table)
    assert ahead.waiting(before=12) == [2, 3]
    assert ahead.waiting(before=13) == [2, 3, 12]
    assert ahead.read(12) == tables[12]
    ahead.remove(3)
    assert InputsAhead(str(tmp_path / "checkpoint")).waiting(before=99) == [2, 12]
    assert not list((tmp_path / "checkpoint" / "inputs-ahead").glob(".*"))  # no temporaries


class Batch:
    """What foreachBatch hands the sink, for the sink's one use of it."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table

    def toArrow(self) -> pa.Table:
        return self.table


class Crash:
    """A background that never runs what it is given: the process died right after Spark
    committed the batch."""

    def submit(self, *args: Any) -> Future[None]:
        done: Future[None] = Future()
        done.set_result(None)
        return done

    def shutdown(self) -> None:
        pass


def _checkpoint(settings: Any, batches: int) -> None:
    """The parts of a query's checkpoint the sink reads (its id, each batch's watermark), and
    the job's topics."""
    ensure_topics(settings.kafka, FRAUD_TOPICS, settings.kafka.partitions)
    folder = Path(settings.lake.checkpoint(NAME))
    (folder / "offsets").mkdir(parents=True, exist_ok=True)
    (folder / "metadata").write_text(json.dumps({"id": "query-1"}))
    for batch in range(batches):
        (folder / "offsets" / str(batch)).write_text(
            "v1\n" + json.dumps({"batchWatermarkMs": 0}) + "\n{}\n")


def _committed(settings: Any, batches: int) -> None:
    """Spark's commit log: batches 0 .. batches - 1 are done as far as Spark knows."""
    folder = Path(settings.lake.checkpoint(NAME)) / "commits"
    folder.mkdir(parents=True, exist_ok=True)
    for batch in range(batches):
        (folder / str(batch)).write_text("v1\n{}\n")


def _batches() -> list[pa.Table]:
    payments = [(KIND_TRANSACTION, T0 + k, json.dumps({
        "transactionId": k, "eventTime": T0 + k * 1_000, "payeeId": k % 2,
        "paymentAmount": 40, "paymentType": "CSH"}).encode()) for k in range(12)]
    rows = [[(KIND_RULE, T0 - 1, _rule(1)), *payments[:4]], payments[4:8],
            [*payments[8:], payments[0]]]  # the last one redelivered
    tables, offset = [], 0
    for batch in rows:
        tables.append(_table(batch, offset))
        offset += len(batch)
    return tables


def _alerts(settings: Any) -> list[tuple[int, str]]:
    table = read_arrow(settings.lake.table(TABLE_FRAUD_ALERTS))
    return sorted(zip(table["rule_id"].to_pylist(), table["transaction_id"].to_pylist(),
                      strict=True))


def _run(settings: Any, tables: list[pa.Table], crash_after: int | None = None) -> None:
    sink = FraudDriverSink(settings)
    sink.warm()
    try:
        for batch_id, table in enumerate(tables):
            if batch_id == crash_after:
                sink._background = Crash()
            sink(Batch(table), batch_id)
    finally:
        if crash_after is None:
            sink.close()
        else:  # gone without delivering: only what a killed process leaves behind is closed
            for other in sink._others:
                other.close()
            sink.outputs.close()


def test_a_batch_committed_by_spark_but_not_delivered_is_delivered_by_the_next_start(
        own_broker, make_settings):
    tables = _batches()
    straight = make_settings(own_broker, fraud={"shards": 2})
    _checkpoint(straight, 3)
    _run(straight, tables)
    expected = _alerts(straight)
    assert len(expected) >= 4  # batches 0 and 1 both alert

    crashed = make_settings(own_broker, fraud={"shards": 2})
    _checkpoint(crashed, 3)
    _run(crashed, tables[:2], crash_after=1)  # the process dies with batch 1 undelivered
    ahead = InputsAhead(crashed.lake.checkpoint(NAME))
    assert ahead.waiting(before=2) == [1]
    before = _alerts(crashed)

    _committed(crashed, 1)  # Spark had not committed batch 1: it hands it over again
    idle = FraudDriverSink(crashed)
    idle.warm()
    idle.close()
    assert _alerts(crashed) == before and ahead.waiting(before=2) == [1]  # left for Spark

    _committed(crashed, 2)  # Spark had committed it: the next start delivers it at once,
    waking = FraudDriverSink(crashed)  # before (and without) any new batch
    waking.warm()
    waking.close()
    assert ahead.waiting(before=99) == []
    resumed = FraudDriverSink(crashed)
    resumed.warm()
    try:
        resumed(Batch(tables[2]), 2)
    finally:
        resumed.close()
    assert _alerts(crashed) == expected


def test_the_last_batchs_drop_counts_reach_the_totals_when_the_sink_closes(
        own_broker, make_settings):
    settings = make_settings(own_broker)
    _checkpoint(settings, 3)
    _run(settings, _batches())  # the last batch holds a redelivered transaction
    totals = read_totals(progress_dir(settings), NAME)
    assert totals == {"duplicate": 1}
