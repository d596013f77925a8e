"""The maintenance DAG's steps on real Delta tables and real Spark checkpoints."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest

from spark_jobs.control.maintenance import (
    clean_checkpoints,
    compact_tables,
    lake_tables,
    prune_old_snapshots,
    run_maintenance,
    vacuum_tables,
)
from spark_jobs.experiments.admin.snapshot import snapshot_paths, write_snapshot
from spark_jobs.streaming.lake.delta import append_rows, load_table, merge_once, read_arrow
from spark_jobs.streaming.spark_session import MIN_BATCHES_TO_RETAIN, retention_conf

pytestmark = pytest.mark.integration


def rows(start: int, n: int) -> pa.Table:
    return pa.table({"k": pa.array(range(start, start + n), pa.int64()),
                     "v": pa.array([f"v{i}" for i in range(start, start + n)])})


def test_compaction_and_vacuum_shrink_every_table_and_keep_its_rows(make_settings):
    settings = make_settings(maintenance={"vacuum_retention": "0s"})
    for name in ("alerts", "raw_events"):
        for batch in range(6):
            append_rows(settings.lake.table(name), rows(batch * 10, 10))
    Path(settings.lake.root, "not_a_table").mkdir()
    assert lake_tables(settings) == ["alerts", "raw_events"]
    before = {n: len(load_table(settings.lake.table(n)).file_uris()) for n in lake_tables(settings)}

    report = compact_tables(settings)
    assert report == {n: {"numFilesAdded": 1, "numFilesRemoved": 6} for n in before}
    deleted = vacuum_tables(settings)
    assert deleted == {"alerts": 6, "raw_events": 6}
    for name in before:
        table = load_table(settings.lake.table(name))
        assert len(table.file_uris()) == 1
        data = read_arrow(settings.lake.table(name)).sort_by("k")
        assert data["k"].to_pylist() == list(range(60))
        on_disk = [p for p in Path(settings.lake.table(name)).glob("*.parquet")]
        assert len(on_disk) == 1


def test_a_streaming_merge_racing_a_compaction_still_commits_every_batch(make_settings):
    """Sinks retry a commit that loses to the maintenance DAG's compaction."""
    settings = make_settings()
    uri = settings.lake.table("experiment_metrics")
    stop = threading.Event()
    errors: list[BaseException] = []

    def compact_forever() -> None:
        while not stop.is_set():
            try:
                compact_tables(settings)
            except BaseException as exc:  # surfaced by the assertion below
                errors.append(exc)
                return

    merge_once(uri, rows(0, 5), ["k"], "job@q", 0)
    racer = threading.Thread(target=compact_forever)
    racer.start()
    try:
        for batch in range(1, 16):
            merge_once(uri, rows(batch * 3, 5), ["k"], "job@q", batch)
    finally:
        stop.set()
        racer.join(60)
    assert errors == []
    data = read_arrow(uri)
    assert sorted(data["k"].to_pylist()) == list(range(0, 15 * 3 + 5))
    assert load_table(uri).transaction_version("job@q") == 15


def test_old_snapshots_are_pruned_to_the_configured_count(make_settings):
    settings = make_settings(maintenance={"snapshots_kept": 2})
    written = [write_snapshot(settings.lake.snapshots, [], as_of_ms=i) for i in range(5)]
    assert prune_old_snapshots(settings) == 3
    assert snapshot_paths(settings.lake.snapshots) == written[-2:]


def _batch_logs(checkpoint: Path, name: str) -> list[int]:
    return sorted(int(p.name) for p in (checkpoint / name).iterdir() if p.name.isdigit())


def test_spark_keeps_the_configured_batches_and_cleanup_removes_only_stale_temps(
        spark, make_settings, tmp_path):
    """A real Spark checkpoint: Spark trims its logs to `checkpoint_batches_kept` itself
    (minBatchesToRetain, as build_session sets it), the maintenance step removes only temp
    files of interrupted writes, and the query resumes after both."""
    settings = make_settings(maintenance={"checkpoint_batches_kept": 2})
    assert retention_conf(settings) == {MIN_BATCHES_TO_RETAIN: "2"}
    assert spark.conf.get(MIN_BATCHES_TO_RETAIN) == "100", "the default, set by build_session"
    source = tmp_path / "input"
    source.mkdir()
    checkpoint = Path(settings.lake.checkpoint("files_job"))
    seen: list[int] = []

    def run_once(index: int) -> None:
        (source / f"part{index}.json").write_text(f'{{"n": {index}}}\n')
        query = (
            spark.readStream.schema("n INT").json(str(source))
            .writeStream.option("checkpointLocation", str(checkpoint))
            .foreachBatch(lambda df, _id: seen.extend(r.n for r in df.collect()))
            .trigger(availableNow=True).start()
        )
        query.awaitTermination(60)
        assert query.exception() is None

    spark.conf.set(MIN_BATCHES_TO_RETAIN, "2")
    try:
        for index in range(6):
            run_once(index)
        # Spark purges below (last batch - minBatchesToRetain) as each batch ends
        offsets = _batch_logs(checkpoint, "offsets")
        assert offsets == _batch_logs(checkpoint, "commits") == [3, 4, 5]
        stale = checkpoint / "offsets" / ".6.b1d2.tmp"
        stale.write_text("partial")
        fresh = checkpoint / "commits" / ".7.c3e4.tmp"
        fresh.write_text("being written")
        hour_ago = time.time() - 7200
        os.utime(stale, (hour_ago, hour_ago))

        assert clean_checkpoints(settings) == {"files_job": 1}
        assert not stale.exists() and fresh.exists()
        assert _batch_logs(checkpoint, "offsets") == offsets, "the logs are Spark's to trim"
        fresh.unlink()

        run_once(6)
    finally:
        spark.conf.set(MIN_BATCHES_TO_RETAIN, "100")
    assert sorted(seen) == [0, 1, 2, 3, 4, 5, 6]  # resumed after batch 5, nothing replayed


def test_maintenance_of_an_empty_lake_does_nothing(make_settings):
    assert run_maintenance(make_settings()) == {
        "compacted": {}, "vacuumed": {}, "snapshots_deleted": 0, "checkpoint_files_deleted": {},
    }


def test_a_remote_lake_root_is_refused_with_a_clear_message(make_settings):
    settings = make_settings()
    remote = replace(settings, lake=replace(settings.lake, root="s3://bucket/lake"))
    with pytest.raises(ValueError, match="not a local path"):
        lake_tables(remote)
