"""The collector settings of a process that runs a fraud engine (processors/resident.py)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from spark_jobs.fraud.processors import resident


@pytest.fixture
def collector() -> Iterator[None]:
    saved = gc.get_threshold()
    try:
        yield
    finally:
        gc.set_threshold(*saved)
        gc.unfreeze()


def test_taking_a_shard_raises_only_the_young_threshold(collector: None) -> None:
    gc.set_threshold(700, 7, 9)
    assert resident.take("no-such-state", 0) is None
    assert gc.get_threshold() == (resident.YOUNG_GENERATION_THRESHOLD, 7, 9)


def test_a_higher_young_threshold_is_kept(collector: None) -> None:
    gc.set_threshold(50_000, 10, 10)
    resident.raise_young_threshold()
    assert gc.get_threshold() == (50_000, 10, 10)


def test_settling_after_a_batch_freezes_what_survived(collector: None) -> None:
    kept = [[index] for index in range(1000)]  # an engine's long-lived windows
    resident.settle_garbage_collector(batch_id=1)
    assert gc.get_freeze_count() >= len(kept)
    resident.settle_garbage_collector(batch_id=resident.FULL_COLLECTION_EVERY)
    assert gc.get_freeze_count() >= len(kept)  # a full collection, then frozen again
