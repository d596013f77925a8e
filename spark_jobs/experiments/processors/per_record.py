"""One record at a time through a processor (CONTRACTS section 9), shared by both processors.

Each record's step runs under `KeyedProcessor.guarded`: an exception from one record becomes
an `error` dead letter and the key's other records go on. A step reports a record it filters
out by design as a `dropped` row of 1; those are summed into one row per reason and key, so a
spammer's thousand capped events cost one output row, not a thousand.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from pyspark.sql import Row

from spark_jobs.streaming.lake.dead_letters import DROPPED_COLUMN, KIND_DROPPED
from spark_jobs.streaming.processor import KeyedProcessor


def each_record(processor: KeyedProcessor, rows: Iterable[Any],
                step: Callable[[Any], Iterable[Row]]) -> Iterator[Row]:
    """The output rows of `step(row)` for every row, guarded; drop rows summed per reason."""
    dropped: Counter[str] = Counter()
    for row in rows:
        for out in processor.guarded(row, lambda row=row: step(row)):
            if out.kind == KIND_DROPPED:
                dropped[out.reason] += getattr(out, DROPPED_COLUMN)
            else:
                yield out
    for reason, count in dropped.items():
        yield processor.dropped(reason, count)
