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


def test_an_engine_process_raises_only_the_young_threshold(collector: None) -> None:
    gc.set_threshold(700, 7, 9)
    resident.raise_young_threshold()
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


@pytest.mark.parametrize("enabled", [True, False])
def test_a_rebuild_runs_without_the_collector_and_freezes_what_it_made(collector: None,
                                                                         enabled: bool) -> None:
    (gc.enable if enabled else gc.disable)()
    try:
        gc.unfreeze()
        with resident.rebuilding():
            assert not gc.isenabled()
            made = [[i] for i in range(1_000)]
        assert gc.isenabled() is enabled
        assert gc.get_freeze_count() >= len(made)
        gc.unfreeze()
        with pytest.raises(ZeroDivisionError), resident.rebuilding():
            made.append([1 // 0])
        assert gc.isenabled() is enabled, "a failed rebuild gives the collector back"
    finally:
        gc.enable()


def test_a_host_rebuilds_its_state_with_the_collector_off(tmp_path, monkeypatch,
                                                          collector: None) -> None:
    from spark_jobs.fraud.core.changelog import LoggedStore
    from spark_jobs.fraud.jobs.engine_host import EngineHost, HostSpec

    spec = HostSpec(str(tmp_path / "cp"), 0, 1, False, 0, 3_600_000, 1_000_000, 10_000)
    EngineHost(spec).files.write_changes(0, LoggedStore().take_changes())
    seen: list[bool] = []
    replay = LoggedStore.apply_changes

    def watched(store: LoggedStore, changes: bytes) -> set[tuple[int, str]]:
        seen.append(gc.isenabled())
        return replay(store, changes)

    monkeypatch.setattr(LoggedStore, "apply_changes", watched)
    EngineHost(spec).restore(0)
    assert seen == [False] and gc.isenabled()
