"""The garbage collector of a process that keeps a fraud engine resident between batches
(the driver mode's engine processes, the spark mode's shard hosts): hundreds of thousands
of long-lived window objects, which CPython's collector would otherwise scan again and again.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

FULL_COLLECTION_EVERY = 2_000  # batches: rare enough that its pause is not in the tail
YOUNG_GENERATION_THRESHOLD = 10_000  # allocations between young collections (CPython's: 700)


def raise_young_threshold() -> None:
    """Fewer young collections in a process that runs an engine (idempotent, cheap).

    Every transaction allocates a few new window objects and lists that mostly live on, so
    at CPython's default threshold the collector scans young objects about every hundred
    transactions, only to promote them: 20-25 % of the engine's CPU offline (BENCHMARKS.md,
    "a new key's window made in one step"). The batch's end still collects and freezes
    (settle_garbage_collector in the driver, settle_engine_process_collector in an engine
    process or shard host); the older generations' thresholds stay as they are.
    """
    young, *older = gc.get_threshold()
    if young < YOUNG_GENERATION_THRESHOLD:
        gc.set_threshold(YOUNG_GENERATION_THRESHOLD, *older)


def settle_garbage_collector(batch_id: int) -> None:
    """Collect the batch's young garbage, then freeze what survived (the engine's windows):
    for the driver's process, which runs more than its engine.

    The windows are long-lived objects by the hundred thousand, and CPython's cyclic
    collector would rescan all of them at every full collection, pauses that dominated the
    sink's tail latency (BENCHMARKS.md, "engine in the driver") and cost a resident shard
    engine about a third of its time. Frozen objects
    are still freed by reference counting when the engine drops them; cyclic garbage that
    outlived a young collection (none from the engine; maybe some from the Spark client) is
    collected by one full collection every FULL_COLLECTION_EVERY batches."""
    if batch_id % FULL_COLLECTION_EVERY == 0:
        gc.unfreeze()
        gc.collect()
    else:
        gc.collect(1)
    gc.freeze()


def settle_engine_process_collector() -> None:
    """An engine process's collector after a batch: the batch's objects collected whole, then
    frozen, and frozen objects never scanned again.

    settle_garbage_collector's periodic full collection rescans every window: at 1,000
    transactions a second, ~0.4 s in each engine process at once every FULL_COLLECTION_EVERY
    batches (~3.5 min), which every alert behind it waited for (BENCHMARKS.md, fourteenth
    session). An engine process holds nothing but its engine, whose objects form no
    reference cycles (tests/fraud/test_fraud_engine_garbage.py): no frozen object there
    becomes cyclic garbage. Cycles a batch makes are collected before they are frozen:
    `gc.collect()` scans every generation but the frozen objects (~0.1 ms a batch)."""
    gc.collect()
    gc.freeze()


@contextmanager
def rebuilding() -> Iterator[None]:
    """The cyclic collector off while a state is rebuilt from a snapshot and change logs,
    and what was rebuilt frozen after (as every batch's survivors are).

    Unpickling and replaying create the engine's windows by the million, each one a young
    object the collector would scan again and again as it promotes them, and full
    collections rescan every window made so far: with the collector on, a 38 MB snapshot
    and 62 MB of change files took 13.5 CPU s to rebuild, 124 MB of change files alone
    20.3 s, against 5.3 and 7.5 s with it off (bench.fraud_restore; BENCHMARKS.md, 2026-11-29
    third session). The state holds no cycles: reference counting frees what the rebuild
    drops. Cyclic garbage made before it (a failed batch's traceback) is collected first,
    while the objects not yet frozen are few; what other threads make meanwhile (the
    driver's: an engine process has none) is frozen with the rest, and freed there by the
    full collection every FULL_COLLECTION_EVERY batches, as after a batch."""
    gc.collect()
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
        gc.freeze()
