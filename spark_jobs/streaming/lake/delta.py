"""Delta tables through delta-rs: exactly-once micro-batch writes, maintenance and reads.

Streaming jobs write from `foreachBatch` with (app_id, batch_id): the batch id is stored
in the same commit as the data (a Delta app transaction), so a batch replayed after a
crash is skipped instead of duplicated. This is safe for one writer per app_id.

A missing table is not an error for writes (the first write creates it) nor for
maintenance (nothing to do); reads raise `TableMissingError` unless a schema is given to
`read_spark`. Timestamps must be `pa.timestamp("us", tz="UTC")` (Spark TimestampType); a
timestamp without a time zone becomes Delta timestamp_ntz.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError

from spark_jobs.streaming.lake.one_per_key import first_per_key, last_per_key
from spark_jobs.streaming.lake.open_tables import OpenTables, forgetting, load_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

_T = TypeVar("_T")


class TableMissingError(FileNotFoundError):
    """A read of a Delta table that does not exist (yet)."""


def table_exists(table_uri: str) -> bool:
    """True when a Delta log with at least one commit exists at the URI."""
    return DeltaTable.is_deltatable(str(table_uri))


def transaction_version(table_uri: str, app_id: str) -> int | None:
    """The last batch id committed by app_id, or None (never written, or no table)."""
    table = load_table(table_uri)
    return None if table is None else table.transaction_version(app_id)


def _already_done(table: DeltaTable | None, app_id: str, batch_id: int) -> bool:
    if batch_id < 0:
        raise ValueError(f"batch_id must not be negative, got {batch_id}")
    done = None if table is None else table.transaction_version(app_id)
    return done is not None and done >= batch_id


def _commit(app_id: str, batch_id: int, metadata: dict[str, str] | None = None
            ) -> CommitProperties:
    return CommitProperties(app_transactions=[Transaction(app_id, batch_id)],
                            custom_metadata=metadata)


def commit_metadata(table_uri: str, key: str, value: str) -> dict[str, Any] | None:
    """The commit info of the newest commit whose custom metadata has `key` = `value`
    (e.g. the writer's app id), or None. Reads the log backwards, newest commits first."""
    table = load_table(table_uri)
    if table is None:
        return None
    for limit in (64, None):
        history = table.history(limit)
        for info in history:
            if info.get(key) == value:
                return info
        if limit is not None and len(history) < limit:
            break
    return None


def append_once(
    table_uri: str,
    data: pa.Table,
    app_id: str,
    batch_id: int,
    partition_by: list[str] | None = None,
    merge_schema: bool = False,
    tables: OpenTables | None = None,
) -> bool:
    """Append the batch unless app_id already committed batch_id; False when skipped.
    `merge_schema` adds columns the table lacks (a table created by an older release);
    `tables`: the writer's open tables (else the table is loaded for this write).

    An empty batch still commits (no data file, only the transaction), so its replay is
    skipped too; the first write creates the table with the data's schema. A commit that
    loses to a concurrent writer (e.g. the maintenance DAG compacting) is retried.
    """

    def write() -> bool:
        table = load_table(table_uri) if tables is None else tables.latest(table_uri)
        if _already_done(table, app_id, batch_id):
            return False
        write_deltalake(
            table if table is not None else table_uri,
            data,
            mode="append",
            partition_by=partition_by,
            commit_properties=_commit(app_id, batch_id),
            schema_mode="merge" if merge_schema and table is not None else None,
        )
        return True

    return with_commit_retries(forgetting(write, tables, table_uri))


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def merge_once(
    table_uri: str, data: pa.Table, keys: Sequence[str], app_id: str, batch_id: int,
    metadata: dict[str, str] | None = None, tables: OpenTables | None = None,
) -> bool:
    """Upsert the batch by primary key unless app_id already committed batch_id (`metadata`:
    custom commit metadata, read back by `commit_metadata`; `tables`: as for append_once).

    Within a batch the last row of a key wins. Key columns must not be null (null never
    matches in MERGE, so it would insert duplicates). An empty batch is committed as an
    empty append, because delta-rs makes no commit for a MERGE of zero source rows. A MERGE
    whose files a concurrent compaction rewrote is run again on the new version.
    """
    key_list = _check_keys(data, keys)
    source = last_per_key(data, key_list)

    def write() -> bool:
        table = load_table(table_uri) if tables is None else tables.latest(table_uri)
        if _already_done(table, app_id, batch_id):
            return False
        _upsert(table, table_uri, source, key_list, _commit(app_id, batch_id, metadata))
        return True

    return with_commit_retries(forgetting(write, tables, table_uri))


def insert_new_once(
    table_uri: str, data: pa.Table, keys: Sequence[str], app_id: str, batch_id: int,
    tables: OpenTables | None = None,
) -> bool:
    """Insert the rows whose key the table does not have yet (never rewrite one), unless
    app_id already committed batch_id: an idempotent sink for records with deterministic ids
    that an at-least-once upstream may deliver twice. Within a batch the first row of a key
    wins. An empty batch is committed as an empty append (the batch marker). `tables`: as
    for append_once. Not streamed, the merge reads only the files whose statistics can hold
    the batch's keys (delta-rs's filter from the source's min and max): an event time in the
    key keeps a growing table's merge fast (BENCHMARKS.md, seventeenth session)."""
    key_list = _check_keys(data, keys)
    source = first_per_key(data, key_list)

    def write() -> bool:
        table = load_table(table_uri) if tables is None else tables.latest(table_uri)
        if _already_done(table, app_id, batch_id):
            return False
        commit = _commit(app_id, batch_id)
        if table is None or source.num_rows == 0:
            target = table if table is not None else table_uri
            write_deltalake(target, source, mode="append", commit_properties=commit)
            return True
        predicate = " AND ".join(f"t.{_quoted(k)} = s.{_quoted(k)}" for k in key_list)
        before = table.version()
        (
            table.merge(source, predicate, source_alias="s", target_alias="t",
                        streamed_exec=False, commit_properties=commit)
            .when_not_matched_insert_all()
            .execute()
        )
        if table.version() == before:  # nothing new: no commit, so no marker (a merge moves
            # the table object to its commit)
            write_deltalake(table, source.slice(0, 0), mode="append", commit_properties=commit)
        return True

    return with_commit_retries(forgetting(write, tables, table_uri))


def replace_slice_once(
    table_uri: str,
    data: pa.Table,
    keys: Sequence[str],
    column: str,
    bounds: tuple[int, int],
    app_id: str,
    batch_id: int,
) -> bool:
    """Make the rows with `bounds[0] < column <= bounds[1]` equal `data`, in one commit,
    unless app_id already committed batch_id: rows of that slice which `data` no longer has
    are deleted, unlike `merge_once`. `data` must lie inside the slice."""
    key_list = _check_keys(data, keys)
    source = last_per_key(data, key_list)
    lower, upper = (int(b) for b in bounds)

    def in_slice(alias: str) -> str:
        return f"{alias}{_quoted(column)} > {lower} AND {alias}{_quoted(column)} <= {upper}"

    def write() -> bool:
        table = load_table(table_uri)
        if _already_done(table, app_id, batch_id):
            return False
        commit = _commit(app_id, batch_id)
        if table is None or source.num_rows == 0:
            if table is not None:  # a MERGE of no rows commits nothing: delete, then mark
                table.delete(in_slice(""))
            _upsert(load_table(table_uri), table_uri, source, key_list, commit)
            return True
        predicate = " AND ".join(f"t.{_quoted(k)} = s.{_quoted(k)}" for k in key_list)
        (
            table.merge(source, predicate, source_alias="s", target_alias="t",
                        commit_properties=commit)
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .when_not_matched_by_source_delete(in_slice("t."))
            .execute()
        )
        return True

    return with_commit_retries(write)


def _check_keys(data: pa.Table, keys: Sequence[str]) -> list[str]:
    key_list = list(keys)
    if not key_list:
        raise ValueError("an upsert needs at least one key column")
    missing = [k for k in key_list if k not in data.column_names]
    if missing:
        raise ValueError(f"key columns not in the data: {missing}")
    nulls = [k for k in key_list if data.column(k).null_count]
    if nulls:
        raise ValueError(f"key columns contain nulls: {nulls}")
    return key_list


def _upsert(
    table: DeltaTable | None,
    table_uri: str,
    source: pa.Table,
    keys: list[str],
    commit: CommitProperties | None,
) -> None:
    if table is None or source.num_rows == 0:
        target = table if table is not None else table_uri
        write_deltalake(target, source, mode="append", commit_properties=commit)
        return
    predicate = " AND ".join(f"t.{_quoted(k)} = s.{_quoted(k)}" for k in keys)
    (
        table.merge(
            source,
            predicate,
            source_alias="s",
            target_alias="t",
            merge_schema=True,  # a table of an older release gains the columns added since
            commit_properties=commit,
        )
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )


def with_commit_retries(write: Callable[[], _T], attempts: int = 8,
                        idempotent: bool = True) -> _T:
    """Run a write again (on the newest table version) when another writer committed first.

    Control-plane tables (alerts, validation results) are written by concurrent Airflow
    tasks, unlike the one-writer-per-app_id streaming sinks. A missing commit file may come
    after the commit landed: only an `idempotent` write is retried on it.
    """
    retried = (CommitFailedError, DeltaError, *((FileNotFoundError,) if idempotent else ()))
    for attempt in range(1, attempts + 1):
        try:
            return write()
        except retried as exc:
            if attempt == attempts or not _is_conflict(exc):
                raise
            time.sleep(random.uniform(0.05, 0.2) * attempt)
    raise AssertionError("unreachable")


def _is_conflict(exc: Exception) -> bool:
    """Another writer got there first, or the log a write read was cleaned meanwhile (a
    sink's short log, open_tables.py: "invalid table version", or a commit file not found,
    which a live fraud_rules append met once after ~1,230 commits, its path in delta-rs not
    found): either way the write, on the table read anew, can succeed; an idempotent write
    whose commit had landed is then found done (its app transaction) and not repeated."""
    if isinstance(exc, CommitFailedError):
        return True
    if isinstance(exc, FileNotFoundError):
        return "_delta_log" in str(exc)
    text = str(exc).lower()
    return ("already exists" in text or "conflict" in text or "concurrent" in text
            or "invalid table version" in text)


def append_rows(table_uri: str, data: pa.Table) -> None:
    """Append rows (no exactly-once bookkeeping), tolerating concurrent writers."""

    def write() -> None:
        table = load_table(table_uri)
        write_deltalake(table if table is not None else table_uri, data, mode="append")

    with_commit_retries(write, idempotent=False)


def upsert_rows(table_uri: str, data: pa.Table, keys: Sequence[str]) -> None:
    """Upsert rows by key (last row of a key wins), tolerating concurrent writers."""
    key_list = _check_keys(data, keys)
    source = last_per_key(data, key_list)
    with_commit_retries(
        lambda: _upsert(load_table(table_uri), table_uri, source, key_list, None)
    )


def compact(table_uri: str) -> dict[str, Any]:
    """Rewrite small files into larger ones (optimize.compact); {} when no table."""
    table = load_table(table_uri)
    return {} if table is None else table.optimize.compact()


def vacuum(
    table_uri: str, retention_hours: int = 168, *, dry_run: bool = False, full: bool = False
) -> list[str]:
    """Delete files unreferenced for longer than retention_hours; returns their paths.

    delta-rs defaults to a dry run and refuses a retention below the table's
    deletedFileRetentionDuration (7 days); the caller's retention is explicit, so that
    check is turned off. A short retention can break readers that listed files before.
    """
    if retention_hours < 0:
        raise ValueError(f"retention_hours must not be negative, got {retention_hours}")
    table = load_table(table_uri)
    if table is None:
        return []
    return table.vacuum(
        retention_hours=retention_hours,
        dry_run=dry_run,
        enforce_retention_duration=False,
        full=full,
    )


def _open(table_uri: str) -> DeltaTable:
    table = load_table(table_uri)
    if table is None:
        raise TableMissingError(f"no Delta table at {table_uri}")
    return table


def read_arrow(table_uri: str, columns: list[str] | None = None, filters: Any = None) -> pa.Table:
    """The table's current rows (an empty table with its schema when it has none).

    `filters` is the DNF list or pyarrow expression of DeltaTable.to_pyarrow_table.
    Raises TableMissingError when there is no table at the URI.
    """
    return _open(table_uri).to_pyarrow_table(columns=columns, filters=filters)


def columns_present(table: DeltaTable, wanted: Sequence[str]) -> list[str]:
    """The wanted columns that the table has, in the wanted order: a table written by an
    older release may lack the columns added since."""
    present = {field.name for field in table.schema().fields}
    return [name for name in wanted if name in present]


def spark_schema(table: DeltaTable) -> StructType:
    """The Spark schema of a Delta table (Delta's schema JSON is Spark's StructType JSON)."""
    from pyspark.sql.types import StructType

    return StructType.fromJson(json.loads(table.schema().to_json()))


def _local_root(table: DeltaTable) -> str:
    uri = table.table_uri.rstrip("/")
    return uri[len("file://") :] if uri.startswith("file://") else uri


def read_spark(spark: SparkSession, table_uri: str, schema: StructType | None = None) -> DataFrame:
    """A batch DataFrame of the table's current files, with the table's schema.

    When the table does not exist: an empty DataFrame with `schema` if given, else
    TableMissingError. Partition columns are recovered from the hive-style paths.
    """
    table = load_table(table_uri)
    if table is None:
        if schema is None:
            raise TableMissingError(f"no Delta table at {table_uri} and no schema given")
        return spark.createDataFrame([], schema)
    struct = spark_schema(table)
    files = table.file_uris()
    if not files:
        return spark.createDataFrame([], struct)
    reader = spark.read.schema(struct)
    if table.metadata().partition_columns:
        reader = reader.option("basePath", _local_root(table))
    return reader.parquet(*files)
