"""What a shard's copy needs to become the stored state, and applying it: plain data and
pure Python, so that a shard host process loads without importing Spark (shard_state.py
decides the Load from Spark state; shard_host.py applies it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from spark_jobs.fraud.core.changelog import LoggedStore
from spark_jobs.fraud.processors.resident import rebuilding

Version = tuple[int, int]  # (seq, nonce)
EMPTY: Version = (0, 0)  # a shard without state

# what a copy needs (Load.kind)
EMPTY_LOAD, OWN, LOGS, REBUILD = "empty", "own", "logs", "rebuild"


@dataclass(frozen=True)
class Load:
    """ShardState.load_plan's answer for one copy: `kind`, what it reads, and the version
    the copy is once it is applied (`target`)."""

    kind: str
    target: Version
    snapshot: bytes | None = None
    logs: list[bytes] = field(default_factory=list)


class LoadError(RuntimeError):
    """A Load that does not fit the copy it is applied to (a protocol error, never data)."""


def apply_load(load: Load, copy: LoggedStore | None
               ) -> tuple[LoggedStore, set[tuple[int, str]] | None]:
    """The store `load` makes of `copy`: the copy itself (no window replayed), the copy
    brought forward in place (the windows the replay put), or a new store (None). A replay
    that fails half way leaves the copy changed: its holder must forget its version first."""
    if load.kind == EMPTY_LOAD:
        return LoggedStore(), None
    if load.kind == REBUILD:
        with rebuilding():
            store = LoggedStore.restore(load.snapshot)
            for log in load.logs:
                store.apply_changes(log)
        return store, None
    if copy is None:
        raise LoadError(f"a {load.kind!r} load needs a copy of the shard")
    if load.kind == OWN:
        return copy, set()
    if load.kind != LOGS:
        raise LoadError(f"unknown load {load.kind!r}")
    put: set[tuple[int, str]] = set()
    with rebuilding():
        for log in load.logs:
            put |= copy.apply_changes(log)
    return copy, put
