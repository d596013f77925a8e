"""Exactly-once writes, maintenance and reads of Delta tables through delta-rs."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

from spark_jobs.streaming.lake.dead_letters import DEAD_LETTER_SCHEMA, dead_letter_rows
from spark_jobs.streaming.lake.delta import (
    OpenTables,
    TableMissingError,
    append_once,
    compact,
    insert_new_once,
    merge_once,
    read_arrow,
    read_spark,
    table_exists,
    transaction_version,
    vacuum,
    with_commit_retries,
)
from spark_jobs.streaming.lake.open_tables import LOG_RETENTION, log_retention_text

pytestmark = pytest.mark.integration

TS = pa.timestamp("us", tz="UTC")
SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.string()), ("at", TS)])
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def batch(keys: list[int], value: str) -> pa.Table:
    return pa.table(
        {"k": keys, "v": [value] * len(keys), "at": pa.array([T0] * len(keys), TS)},
        schema=SCHEMA,
    )


@pytest.fixture
def uri(tmp_path: Path) -> str:
    return str(tmp_path / "lake" / "table")


def rows(uri: str) -> list[tuple]:
    table = read_arrow(uri).sort_by([("k", "ascending"), ("v", "ascending")])
    return [(r["k"], r["v"]) for r in table.to_pylist()]


def test_append_once_skips_a_replayed_batch(uri):
    assert not table_exists(uri)
    assert transaction_version(uri, "job") is None
    assert append_once(uri, batch([1, 2], "a"), "job", 0)
    assert append_once(uri, batch([3], "b"), "job", 1)
    assert not append_once(uri, batch([3], "b"), "job", 1)  # replay after a crash
    assert not append_once(uri, batch([1, 2], "a"), "job", 0)
    assert transaction_version(uri, "job") == 1
    assert rows(uri) == [(1, "a"), (2, "a"), (3, "b")]
    # another app id has its own batch ids
    assert append_once(uri, batch([4], "c"), "other", 0)
    assert transaction_version(uri, "other") == 0
    assert read_arrow(uri).num_rows == 4
    assert read_arrow(uri).schema.field("at").type == TS


def test_empty_batch_is_recorded_so_its_replay_is_skipped(uri):
    assert append_once(uri, SCHEMA.empty_table(), "job", 0)
    assert table_exists(uri)
    assert transaction_version(uri, "job") == 0
    assert read_arrow(uri).num_rows == 0
    assert read_arrow(uri).schema == SCHEMA
    assert not append_once(uri, batch([1], "late replay"), "job", 0)
    assert read_arrow(uri).num_rows == 0


def test_negative_batch_id_is_rejected(uri):
    with pytest.raises(ValueError):
        append_once(uri, batch([1], "a"), "job", -1)


def test_merge_once_upserts_and_is_idempotent(uri):
    assert merge_once(uri, batch([1, 2], "a"), ["k"], "m", 0)  # creates the table
    assert merge_once(uri, batch([2, 3], "b"), ["k"], "m", 1)
    assert rows(uri) == [(1, "a"), (2, "b"), (3, "b")]
    assert not merge_once(uri, batch([1, 2, 3], "zzz"), ["k"], "m", 1)
    assert rows(uri) == [(1, "a"), (2, "b"), (3, "b")]
    assert transaction_version(uri, "m") == 1


def test_merge_once_last_row_of_a_key_wins_within_a_batch(uri):
    merge_once(uri, batch([1], "a"), ["k"], "m", 0)
    data = pa.concat_tables([batch([1, 2], "first"), batch([2, 1], "last")])
    assert merge_once(uri, data, ["k"], "m", 1)
    assert rows(uri) == [(1, "last"), (2, "last")]
    # the same on table creation
    other = uri + "_new"
    merge_once(other, data, ["k"], "m", 0)
    assert rows(other) == [(1, "last"), (2, "last")]


@pytest.mark.parametrize("kept_open", [False, True], ids=["loaded", "kept-open"])
def test_insert_new_once_never_rewrites_a_key_and_skips_a_replay(uri, kept_open):
    """The same with the table loaded for each write and kept open between them (a sink's)."""
    tables = OpenTables(log_retention_ms=60_000) if kept_open else None
    data = pa.concat_tables([batch([1, 2], "first"), batch([2], "again")])
    # creates the table; the first row of a key wins
    assert insert_new_once(uri, data, ["k"], "s", 0, tables=tables)
    assert rows(uri) == [(1, "first"), (2, "first")]
    assert insert_new_once(uri, batch([2, 3], "later"), ["k"], "s", 1, tables=tables)
    assert rows(uri) == [(1, "first"), (2, "first"), (3, "later")], "a redelivery adds nothing"
    assert not insert_new_once(uri, batch([4], "replay"), ["k"], "s", 1, tables=tables)
    # the empty batch's marker
    assert insert_new_once(uri, batch([], "none"), ["k"], "s", 2, tables=tables)
    assert rows(uri) == [(1, "first"), (2, "first"), (3, "later")]
    assert transaction_version(uri, "s") == 2
    if kept_open:  # the open tables were used: they gave the table its log retention
        assert DeltaTable(uri).metadata().configuration[LOG_RETENTION] == "interval 60 seconds"
    # merges nothing
    assert insert_new_once(uri, batch([1, 3], "all known"), ["k"], "s", 3, tables=tables)
    assert transaction_version(uri, "s") == 3, "the batch is still marked done"
    assert rows(uri) == [(1, "first"), (2, "first"), (3, "later")]


def test_insert_new_once_reads_only_the_files_a_time_key_can_match(uri):
    """With an event time in the key, the merge reads the files whose ts statistics overlap
    the batch, not the whole table (training_samples matches on (sample_id, ts)): a table
    that grows for days keeps the cost of a batch's insert. A row already there is still
    found in the file it is in."""
    def timed(keys: list[str], ts: list[int]) -> pa.Table:
        return pa.table({"id": keys, "ts": pa.array(ts, pa.int64())})

    for day in range(5):  # five files, each its own range of ts; every file's ids span a-z
        assert insert_new_once(uri, timed([f"{letter}{day}" for letter in "amz"],
                                          [day * 100 + i for i in range(3)]),
                               ["id", "ts"], "s", day)

    def scanned(keys: list[str], batch_id: int) -> tuple[int, int, int]:
        assert insert_new_once(uri, timed(["m4", f"new{batch_id}"], [401, 402]), keys, "s",
                               batch_id)
        merge = DeltaTable(uri).history(1)[0]["operationMetrics"]
        return (merge["num_target_files_scanned"], merge["num_target_files_skipped_during_scan"],
                merge["num_target_rows_inserted"])

    assert scanned(["id", "ts"], 5) == (1, 4, 1)
    assert scanned(["id"], 6)[0] >= 5, "by the id alone, every file may hold it"
    ids = read_arrow(uri)["id"].to_pylist()
    assert ids.count("m4") == 1 and {"new5", "new6"} <= set(ids)


def test_merge_once_composite_key_and_empty_batch(uri):
    two = pa.schema([("exp", pa.string()), ("w", pa.int64()), ("n", pa.int64())])
    merge_once(
        uri,
        pa.table({"exp": ["x", "x"], "w": [1, 2], "n": [1, 1]}, schema=two),
        ["exp", "w"],
        "m",
        0,
    )
    merge_once(
        uri,
        pa.table({"exp": ["x", "y"], "w": [2, 2], "n": [5, 5]}, schema=two),
        ["exp", "w"],
        "m",
        1,
    )
    assert merge_once(uri, two.empty_table(), ["exp", "w"], "m", 2)  # MERGE would not commit
    assert transaction_version(uri, "m") == 2
    got = read_arrow(uri).sort_by([("exp", "ascending"), ("w", "ascending")]).to_pylist()
    assert got == [
        {"exp": "x", "w": 1, "n": 1},
        {"exp": "x", "w": 2, "n": 5},
        {"exp": "y", "w": 2, "n": 5},
    ]
    with pytest.raises(ValueError, match="nulls"):
        merge_once(
            uri, pa.table({"exp": [None], "w": [1], "n": [1]}, schema=two), ["exp", "w"], "m", 3
        )
    with pytest.raises(ValueError, match="not in the data"):
        merge_once(uri, two.empty_table(), ["nope"], "m", 3)


def test_compaction_reduces_files_keeps_rows_and_transactions(uri):
    for i in range(6):
        append_once(uri, batch([i * 10, i * 10 + 1], f"b{i}"), "job", i)
    before = len(DeltaTable(uri).file_uris())
    metrics = compact(uri)
    assert metrics["numFilesRemoved"] == before == 6
    assert len(DeltaTable(uri).file_uris()) == 1
    assert read_arrow(uri).num_rows == 12
    assert transaction_version(uri, "job") == 5
    assert not append_once(uri, batch([0], "b0"), "job", 5)
    # files no longer referenced go once vacuumed with a zero retention
    removed = vacuum(uri, retention_hours=0)
    assert len(removed) == 6
    assert read_arrow(uri).num_rows == 12


def test_open_tables_see_every_commit_made_since_their_last_write(uri):
    """A writer keeps its table open between batches; what others committed meanwhile (a
    compaction, the same app id in another process, another app) must still count."""
    tables = OpenTables()
    assert tables.latest(uri) is None  # no table yet
    assert append_once(uri, batch([1], "a"), "job", 0, tables=tables)
    assert append_once(uri, batch([2], "b"), "job", 1, tables=tables)
    opened = tables.latest(uri)
    assert opened is not None
    assert append_once(uri, batch([3], "c"), "job", 2)  # e.g. a replay in another process
    compact(uri)
    assert append_once(uri, batch([9], "z"), "other", 0)
    assert tables.latest(uri) is opened  # the same object, brought up to date
    assert opened.transaction_version("job") == 2
    assert opened.transaction_version("other") == 0
    assert not append_once(uri, batch([3], "c"), "job", 2, tables=tables)  # already there
    assert append_once(uri, batch([4], "d"), "job", 3, tables=tables)
    assert tables.latest(uri) is opened  # a write moves the object to its commit
    assert rows(uri) == [(1, "a"), (2, "b"), (3, "c"), (4, "d"), (9, "z")]
    assert transaction_version(uri, "job") == 3
    assert merge_once(uri, batch([1], "a2"), ["k"], "merger", 0, tables=tables)
    assert not merge_once(uri, batch([1], "a3"), ["k"], "merger", 0, tables=tables)
    assert rows(uri) == [(1, "a2"), (2, "b"), (3, "c"), (4, "d"), (9, "z")]


def _log_files(uri: str) -> list[str]:
    return sorted(p.name for p in (Path(uri) / "_delta_log").iterdir() if p.suffix == ".json")


def _age_log(uri: str, seconds: float) -> None:
    """Make every file of the log `seconds` older (delta-rs judges expiry by modification
    time), so that expiry does not depend on how fast the machine appends."""
    for path in (Path(uri) / "_delta_log").iterdir():
        stat = path.stat()
        os.utime(path, (stat.st_atime - seconds, stat.st_mtime - seconds))


def test_a_sinks_open_tables_keep_the_log_short(uri):
    """Every commit file stays 30 days by default and delta-rs lists them all at each
    write: a sink's tables keep theirs `log_retention` long instead. When delta-rs writes a
    log checkpoint (every 100 commits) it deletes the commits before the newest checkpoint
    that has itself expired. Nothing is lost: the rows, every app's transaction (also one
    whose only commit was deleted) and a fresh reader see every batch."""
    assert append_once(uri, batch([0], "old"), "other", 0)  # a table of an older release
    assert LOG_RETENTION not in DeltaTable(uri).metadata().configuration
    tables = OpenTables(log_retention_ms=60_000)
    for batch_id in range(1, 105):  # past the first checkpoint (version 99)
        assert append_once(uri, batch([batch_id], "v"), "job", batch_id, tables=tables)
    assert DeltaTable(uri).metadata().configuration[LOG_RETENTION] == "interval 60 seconds"
    before = _log_files(uri)
    _age_log(uri, 3600)  # everything so far, the checkpoint too, expired an hour ago
    for batch_id in range(105, 205):  # the next checkpoint deletes what came before 99
        assert append_once(uri, batch([batch_id], "v"), "job", batch_id, tables=tables)
    after = _log_files(uri)
    assert after[0] == f"{99:020}.json", "commits before the expired checkpoint stay"
    assert set(before) - set(after) == {f"{v:020}.json" for v in range(99)}
    fresh = DeltaTable(uri)
    assert fresh.transaction_version("job") == 204
    assert fresh.transaction_version("other") == 0  # its only commit is gone: the checkpoint
    assert rows(uri) == [(0, "old"), *((k, "v") for k in range(1, 205))]
    version = fresh.version()
    assert OpenTables(log_retention_ms=60_000).latest(uri).version() == version  # set once


def test_open_tables_without_a_retention_leave_the_log_alone(uri):
    tables = OpenTables()
    assert append_once(uri, batch([1], "a"), "job", 0, tables=tables)
    assert append_once(uri, batch([2], "b"), "job", 1, tables=tables)
    assert LOG_RETENTION not in DeltaTable(uri).metadata().configuration
    assert log_retention_text(120_000) == "interval 120 seconds"
    assert log_retention_text(1) == "interval 1 seconds"


def test_a_failed_write_reads_its_table_anew(uri):
    tables = OpenTables()
    assert append_once(uri, batch([1], "a"), "job", 0, tables=tables)
    opened = tables.latest(uri)
    wrong = pa.table({"k": ["not a number"]})
    with pytest.raises(DeltaError):  # its schema does not match the table's
        append_once(uri, wrong, "job", 1, tables=tables)
    assert tables.latest(uri) is not opened
    assert append_once(uri, batch([2], "b"), "job", 1, tables=tables)
    assert rows(uri) == [(1, "a"), (2, "b")]


def test_maintenance_and_reads_on_a_missing_table(uri):
    assert compact(uri) == {}
    assert vacuum(uri, 0) == []
    with pytest.raises(TableMissingError):
        read_arrow(uri)


def test_partitioned_append_and_filtered_read(uri):
    data = pa.table({"day": ["d1", "d1", "d2"], "n": [1, 2, 3]})
    append_once(uri, data, "job", 0, partition_by=["day"])
    append_once(uri, data, "job", 1, partition_by=["day"])
    assert DeltaTable(uri).metadata().partition_columns == ["day"]
    assert read_arrow(uri, columns=["n"], filters=[("day", "=", "d2")]).to_pylist() == [
        {"n": 3},
        {"n": 3},
    ]


def test_dead_letter_rows_build_the_table_schema(uri):
    table = dead_letter_rows(
        "filter_events",
        topic=["events", "events"],
        partition=[0, 1],
        offset=[5, 6],
        kafka_timestamp=[1767225600000, None],
        key=[b"42", None],
        raw_value=[b"\xff not utf-8", "{}"],
        reason=["not valid JSON", "missing field user_id"],
        recorded_at=T0,
    )
    assert table.schema == DEAD_LETTER_SCHEMA
    assert table.column("raw_value").to_pylist()[0].endswith(" not utf-8")
    assert append_once(uri, table, "filter_events", 0)
    assert read_arrow(uri).schema == DEAD_LETTER_SCHEMA
    with pytest.raises(ValueError, match="differ in length"):
        dead_letter_rows(
            "j",
            topic=[],
            partition=[1],
            offset=[],
            kafka_timestamp=[],
            key=[],
            raw_value=[],
            reason=[],
        )


@pytest.mark.spark
def test_read_spark(spark, uri, tmp_path):
    from pyspark.sql.types import LongType, StructField, StructType, TimestampType

    with pytest.raises(TableMissingError):
        read_spark(spark, uri)
    wanted = StructType([StructField("k", LongType())])
    assert read_spark(spark, uri, schema=wanted).count() == 0

    append_once(uri, SCHEMA.empty_table(), "job", 0)
    empty = read_spark(spark, uri)
    assert empty.count() == 0
    assert empty.schema["at"].dataType == TimestampType()

    append_once(uri, batch([1, 2], "a"), "job", 1)
    merge_once(uri, batch([2], "b"), ["k"], "m", 0)
    frame = read_spark(spark, uri)
    assert frame.schema["at"].dataType == TimestampType()
    got = sorted((r.k, r.v, r.at) for r in frame.collect())
    naive = T0.replace(tzinfo=None)  # session time zone is UTC
    assert got == [(1, "a", naive), (2, "b", naive)]

    parted = str(tmp_path / "parted")
    append_once(parted, pa.table({"day": ["d1", "d2"], "n": [1, 2]}), "job", 0, ["day"])
    got = sorted((r.day, r.n) for r in read_spark(spark, parted).collect())
    assert got == [("d1", 1), ("d2", 2)]


def test_replace_slice_once_deletes_rows_the_new_slice_no_longer_has(tmp_path):
    from spark_jobs.streaming.lake.delta import replace_slice_once

    uri = str(tmp_path / "t")
    data = pa.table({"k": pa.array([1, 2, 3, 4], pa.int64()), "w": pa.array([5, 15, 15, 25]),
                     "v": ["a", "b", "c", "d"]})
    assert replace_slice_once(uri, data, ["k"], "w", (0, 100), "day@1", 0)
    day = pa.table({"k": pa.array([2], pa.int64()), "w": pa.array([15]), "v": ["B"]})
    assert replace_slice_once(uri, day, ["k"], "w", (10, 20), "day@1", 1)
    assert not replace_slice_once(uri, day, ["k"], "w", (10, 20), "day@1", 1)  # a replay
    rows = sorted(read_arrow(uri).to_pylist(), key=lambda r: r["k"])
    assert [(r["k"], r["v"]) for r in rows] == [(1, "a"), (2, "B"), (4, "d")]  # 3 deleted

    empty = day.slice(0, 0)
    assert replace_slice_once(uri, empty, ["k"], "w", (10, 20), "day@1", 2)
    assert sorted(r["k"] for r in read_arrow(uri).to_pylist()) == [1, 4]
    assert transaction_version(uri, "day@1") == 2


def test_a_write_whose_starting_log_was_cleaned_is_retried():
    """A write longer than a sink's log retention (a large compaction) finds the commits it
    started from deleted; read anew, it succeeds."""
    attempts = []

    def write() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise DeltaError("Invalid table version: 21")
        return "done"

    assert with_commit_retries(write) == "done"
    assert len(attempts) == 2
    with pytest.raises(DeltaError, match="schema"):  # anything else is raised at once
        with_commit_retries(lambda: (_ for _ in ()).throw(DeltaError("schema mismatch")))


def test_a_write_that_finds_a_commit_file_of_its_log_deleted_is_retried():
    """delta-rs raises a plain FileNotFoundError for a commit file cleaned from under a
    write; another missing file (a data file, the input) is raised at once."""
    attempts = []

    def write() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise FileNotFoundError("Object at location /lake/t/_delta_log/00000000000000000618"
                                    ".json not found: No such file or directory (os error 2)")
        return "done"

    assert with_commit_retries(write) == "done"
    assert len(attempts) == 2
    with pytest.raises(FileNotFoundError, match="part-0"):
        with_commit_retries(lambda: (_ for _ in ()).throw(
            FileNotFoundError("Object at location /lake/t/part-0.parquet not found")))
    attempts.clear()
    with pytest.raises(FileNotFoundError, match="_delta_log"):  # its commit may have landed
        with_commit_retries(write, idempotent=False)
    assert len(attempts) == 1
