"""Per-user hourly capping of a whole batch at once: HourlyCap's decisions, vectorized.

Row by row, a user's records are taken in topic offset order (partition, offset); a late
one (behind the watermark) is refused and takes no room; any other is admitted while its
hour has fewer than `cap` admitted records. So an on-time record is admitted exactly when
its rank among its user's on-time records of the same hour, in offset order, plus that
hour's stored count is below `cap`. One sort by (user, hour, partition, offset) gives every
rank; the stored counts are read and written once per (user, hour), not once per record.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from spark_jobs.experiments.core.capping import HOUR_MS, HourlyCap

ADMITTED, CAPPED, LATE = 0, 1, 2  # the outcome of a record


def cap_batch(counters: Mapping[int, HourlyCap], users: np.ndarray, ts: np.ndarray,
              partitions: np.ndarray, offsets: np.ndarray, watermark_ms: int) -> np.ndarray:
    """The outcome of each row (ADMITTED, CAPPED or LATE), as `HourlyCap.admit` gives it for
    each user's rows in (partition, offset) order after `expire(watermark_ms)`, ties kept in
    row order. `counters` holds every user of `users`; each is expired and counts what it
    admitted, exactly as row-by-row capping leaves it."""
    for counter in counters.values():
        counter.expire(watermark_ms)
    outcome = np.full(len(users), LATE, dtype=np.int8)
    timely = np.flatnonzero(ts >= watermark_ms)
    if len(timely) == 0:
        return outcome
    user, hour = users[timely], ts[timely] // HOUR_MS
    order = np.lexsort((offsets[timely], partitions[timely], hour, user))  # stable
    user, hour = user[order], hour[order]
    new_group = np.empty(len(order), dtype=bool)
    new_group[0] = True
    new_group[1:] = (user[1:] != user[:-1]) | (hour[1:] != hour[:-1])
    starts = np.flatnonzero(new_group)
    sizes = np.diff(np.append(starts, len(order)))
    stored = _count_groups(counters, user[starts].tolist(), hour[starts].tolist(),
                           sizes.tolist())
    rank = np.arange(len(order)) - np.repeat(starts, sizes)
    admitted = rank + np.repeat(stored, sizes) < _cap_of(counters)
    outcome[timely[order]] = np.where(admitted, ADMITTED, CAPPED)
    return outcome


def _count_groups(counters: Mapping[int, HourlyCap], users: list[int], hours: list[int],
                  sizes: list[int]) -> np.ndarray:
    """Each (user, hour) group's stored count before the batch; the counters then hold
    what the group admitted on top (a full hour stays as it is)."""
    stored = np.empty(len(users), dtype=np.int64)
    for i, (user, hour, size) in enumerate(zip(users, hours, sizes, strict=True)):
        counter = counters[user]
        seen = counter.counts.get(hour, 0)
        stored[i] = seen
        if seen < counter.cap:
            counter.counts[hour] = min(counter.cap, seen + size)
    return stored


def _cap_of(counters: Mapping[int, HourlyCap]) -> int:
    caps = {counter.cap for counter in counters.values()}
    if len(caps) != 1:
        raise ValueError(f"one cap per batch expected, got {sorted(caps)}")
    return caps.pop()
