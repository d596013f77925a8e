"""One record at a time through a processor (CONTRACTS section 9), shared by both processors.

An exception from one record's step becomes that record's `error` dead letter (worded by
`KeyedProcessor.guarded`) and the key's other records go on. The step runs directly in a
try block, not through `guarded` itself: this loop is the metrics job's hot path, and the
happy path then costs one call. A step reports a record it filters out by design as a
`dropped` row of 1; those are summed into one row per reason and key, so a spammer's
thousand capped events cost one output row, not a thousand.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NoReturn

from pyspark.sql import Row

from spark_jobs.streaming.lake.dead_letters import DROPPED_COLUMN, KIND_DROPPED
from spark_jobs.streaming.processor import KeyedProcessor


def each_record(processor: KeyedProcessor, rows: Iterable[Any],
                step: Callable[[Any], Iterable[Row]]) -> Iterator[Row]:
    """The output rows of `step(row)` for every row, guarded; drop rows summed per reason."""
    dropped: Counter[str] = Counter()
    for row in rows:
        try:
            out = step(row)
        except Exception as exc:  # one bad record must not crash-loop the query
            out = processor.guarded(row, lambda exc=exc: _raise(exc))
        for one in out:
            if one.kind == KIND_DROPPED:
                dropped[one.reason] += getattr(one, DROPPED_COLUMN)
            else:
                yield one
    for reason, count in dropped.items():
        yield processor.dropped(reason, count)


def _raise(exc: Exception) -> NoReturn:
    raise exc
