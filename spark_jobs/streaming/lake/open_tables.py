"""Delta tables a writer loads, or keeps open between its batches (delta.py's writes).

Loading a table replays its log from the last checkpoint; a streaming sink that writes every
few hundred milliseconds keeps its tables open instead and reads only the commits since its
last write (BENCHMARKS.md 2026-11-29).

A streaming sink commits every micro-batch, and Delta keeps every commit file for 30 days by
default. delta-rs lists the whole `_delta_log` folder at each write, so an append got slower
with every commit the table ever had: `fraud_alerts` went from 16 to 76 ms in five minutes at
1,000 transactions/s (~20 µs per commit: a job on a 10 s trigger would pay ~0.2 s more per
day). A sink's open tables therefore keep their log short (`maintenance.log_retention`): when
delta-rs writes a log checkpoint (every 100 commits) it deletes the commits before the newest
checkpoint that has itself expired, so the log holds about a retention's worth of commits and
up to 100 more. What the sinks read stays whole: a checkpoint carries every app's transaction
version, `history()` (delta.commit_metadata) finds a lineage's newest commit among the kept
ones, no code loads an older version, and the data files stay until VACUUM. A write that takes
longer than the retention (a large compaction) can find the commits it started from deleted;
it is retried on the table read anew (delta.with_commit_retries). The setting governs: a
retention set on the table by other means is replaced.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

_T = TypeVar("_T")
LOG_RETENTION = "delta.logRetentionDuration"


def log_retention_text(retention_ms: int) -> str:
    """Delta's interval text of a retention, in whole seconds (at least one)."""
    return f"interval {max(1, -(-retention_ms // 1000))} seconds"


def load_table(table_uri: str) -> DeltaTable | None:
    """The table at its latest version, or None when there is none (one log replay)."""
    try:
        return DeltaTable(str(table_uri))
    except TableNotFoundError:
        return None


class OpenTables:
    """Delta tables a writer keeps open between its batches, each brought to its newest
    version by reading only the commits since the last batch. Loading a table replays its
    log from the last checkpoint (up to 100 commits): ~30 ms per batch for `fraud_alerts`
    at six commits a second, over a quarter of its sink (BENCHMARKS.md 2026-11-29).
    One writer's: not shared between threads. With `log_retention_ms`, each table it opens
    keeps its log commits that long (module docstring)."""

    def __init__(self, log_retention_ms: int | None = None) -> None:
        self._open: dict[str, DeltaTable] = {}
        self._retention = (None if log_retention_ms is None
                           else log_retention_text(log_retention_ms))

    def latest(self, table_uri: str) -> DeltaTable | None:
        """The table at its newest version, or None when there is none yet."""
        table = self._open.get(table_uri)
        if table is not None:
            try:
                table.update_incremental()
                return table
            except DeltaError:  # e.g. its log was cleaned past our version: read it anew
                del self._open[table_uri]
        table = load_table(table_uri)
        if table is not None:
            self._bound_log(table)
            self._open[table_uri] = table
        return table

    def _bound_log(self, table: DeltaTable) -> None:
        """Give the table the log retention, once (a table of an older release, or one this
        writer just created). delta-rs commits it past concurrent appends; those appends then
        fail as a conflict (the metadata changed) and are retried on the table read anew."""
        retention = self._retention
        if retention is None or table.metadata().configuration.get(LOG_RETENTION) == retention:
            return
        table.alter.set_table_properties({LOG_RETENTION: retention})
        table.update_incremental()

    def forget(self, table_uri: str) -> None:
        """Read the table anew next time (after a failed write left it in doubt)."""
        self._open.pop(table_uri, None)


def forgetting(write: Callable[[], _T], tables: OpenTables | None, table_uri: str
               ) -> Callable[[], _T]:
    """`write`, after whose failure (reading the table, checking, writing) the table is read
    anew: a retry, or the next batch, must not trust the object that failed."""
    if tables is None:
        return write

    def guarded() -> _T:
        try:
            return write()
        except BaseException:
            tables.forget(table_uri)
            raise

    return guarded
