"""Delta tables a writer loads, or keeps open between its batches (delta.py's writes).

Loading a table replays its log from the last checkpoint; a streaming sink that writes every
few hundred milliseconds keeps its tables open instead and reads only the commits since its
last write (BENCHMARKS.md 2026-11-29).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

_T = TypeVar("_T")


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
    One writer's: not shared between threads."""

    def __init__(self) -> None:
        self._open: dict[str, DeltaTable] = {}

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
            self._open[table_uri] = table
        return table

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
