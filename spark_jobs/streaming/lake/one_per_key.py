"""One row per key of an Arrow batch, in batch order: what a MERGE or an insert-new needs
(a MERGE rejects duplicate source keys; first arrival or last update wins)."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

_ROW = "__tideline_row"


def _one_per_key(data: pa.Table, keys: Sequence[str], pick: str) -> pa.Table:
    """One row per key, the first ("min") or last ("max") in batch order, order kept."""
    if data.num_rows <= 1:
        return data
    numbered = data.append_column(_ROW, pa.array(range(data.num_rows), pa.int64()))
    chosen = numbered.group_by(list(keys), use_threads=False).aggregate([(_ROW, pick)])
    if chosen.num_rows == data.num_rows:
        return data
    keep = chosen[f"{_ROW}_{pick}"]
    return data.take(pc.take(keep, pc.sort_indices(keep)))


def last_per_key(data: pa.Table, keys: Sequence[str]) -> pa.Table:
    """Keep the last row of each key (in batch order): MERGE rejects duplicate sources."""
    return _one_per_key(data, keys, "max")


def first_per_key(data: pa.Table, keys: Sequence[str]) -> pa.Table:
    """Keep the first row of each key (in batch order): the first arrival wins."""
    return _one_per_key(data, keys, "min")
