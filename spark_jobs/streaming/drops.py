"""Drop counts: every record a job does not pass on is counted, per job and reason.

CONTRACTS section 9: nothing is dropped without a count. Dead letters count by their reason;
records filtered out by design (non-critical type, capped, duplicate, outside any period of
the snapshot, duplicate view, ...) count by theirs. Counts reach the progress report from two
places: the sink (what its batch's rows say: `note_batch`) and Spark's observed metrics named
OBSERVED (filters that run before any stateful step). The progress listener adds both to the
batch's report and to the job's running totals in `<lake.root>/_progress/<job>.drops.json`,
once per batch id of a checkpoint lineage (a replayed batch is not counted twice).
"""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

OBSERVED = "drops"  # name of the observed metrics (one column per reason) of a job's plan

_pending: dict[str, dict[int, Counter[str]]] = {}
_lock = threading.Lock()
_totals_lock = threading.Lock()  # the listener's thread and a closing sink both add


def note_batch(job: str, batch_id: int, counts: Mapping[str, int]) -> None:
    """The sink's drop counts of one batch (kept until the listener takes them)."""
    with _lock:
        _pending.setdefault(job, {})[batch_id] = Counter(
            {reason: int(n) for reason, n in counts.items() if n})


def take_batch(job: str, batch_id: int) -> Counter[str]:
    """The sink's counts of a batch (empty when the sink noted none), forgotten afterwards;
    counts of older batches left behind (a batch whose progress never came) go too."""
    with _lock:
        batches = _pending.get(job, {})
        counts = batches.pop(batch_id, Counter())
        for older in [b for b in batches if b < batch_id]:
            counts.update(batches.pop(older))
        return counts


def take_untaken(job: str) -> dict[int, Counter[str]]:
    """The sink's counts of every batch the listener has not taken, by batch, forgotten
    afterwards: what a sink learnt after Spark reported the batch, at its close."""
    with _lock:
        return _pending.pop(job, {})


def observed_counts(progress: Mapping[str, Any]) -> Counter[str]:
    """The OBSERVED metrics of a StreamingQueryProgress (its JSON form)."""
    row = (progress.get("observedMetrics") or {}).get(OBSERVED) or {}
    return Counter({str(k): int(v) for k, v in row.items() if isinstance(v, int) and v})


def totals_path(folder: Path, job: str) -> Path:
    return folder / f"{job}.drops.json"


def read_totals(folder: Path, job: str) -> dict[str, int]:
    """The job's drop counts since its lake was created, by reason (empty if none)."""
    state = _read_state(totals_path(folder, job))
    return dict(state.get("total", {}))


def add_batch(folder: Path, job: str, lineage: str, batch_id: int, counts: Counter[str]
              ) -> dict[str, int]:
    """Add one batch's counts to the job's totals, unless this lineage already added that
    batch; returns the totals."""
    return _add_once(folder, job, "batches", lineage, batch_id, counts)


def add_late(folder: Path, job: str, lineage: str, batch_id: int, counts: Counter[str]
             ) -> dict[str, int]:
    """Add counts a sink learnt after Spark reported their batch (fraud's driver mode
    delivers its last batch when it stops), once per lineage and batch; returns the totals."""
    return _add_once(folder, job, "late", lineage, batch_id, counts)


def _add_once(folder: Path, job: str, ledger: str, lineage: str, batch_id: int,
              counts: Counter[str]) -> dict[str, int]:
    """Add `counts` unless `ledger` says this lineage already added `batch_id`."""
    with _totals_lock:
        path = totals_path(folder, job)
        state = _read_state(path)
        total = Counter(state.get("total", {}))
        done = state.get(ledger, {})
        if done.get(lineage, -1) >= batch_id:
            return dict(total)
        total.update(counts)
        _write_state(path, {**state, "total": dict(total), ledger: {**done, lineage: batch_id}})
        return dict(total)


def _write_state(path: Path, state: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_suffix(f".json.{os.getpid()}.tmp")  # another process may write too
    temp.write_text(json.dumps(state, sort_keys=True))
    os.replace(temp, path)


def _read_state(path: Path) -> dict[str, Any]:
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def describe_drops(counts: Mapping[str, int]) -> str:
    """`late 3, malformed 2` (largest first), or `none`."""
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{reason} {n:,}" for reason, n in ordered if n) or "none"
