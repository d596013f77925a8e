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
    path = totals_path(folder, job)
    state = _read_state(path)
    total = Counter(state.get("total", {}))
    done = state.get("batches", {})
    if done.get(lineage, -1) >= batch_id:
        return dict(total)
    total.update(counts)
    state = {"total": dict(total), "batches": {**done, lineage: batch_id}}
    temp = path.with_suffix(".json.tmp")
    temp.write_text(json.dumps(state, sort_keys=True))
    os.replace(temp, path)
    return dict(total)


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
