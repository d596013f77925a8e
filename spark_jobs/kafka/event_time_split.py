"""Admission control aligned on event time: with a backlog larger than the per-trigger limit,
cut every partition at (about) the same event time instead of the same share of its backlog.

Why: Spark's watermark is global. When partitions differ in density (a spammer, a hot key,
ramped experiments), a proportional split lets the sparse partitions run ahead in event time
and the dense partition's next records arrive behind the watermark: late, not counted. So the
proportional plan is only a first guess; the partitions that reached further than the slowest
one are cut back, by binary search over their offsets, to the slowest one's event time. The
plan reads no more than the limit and always progresses (the slowest partition keeps its share).
This is pure logic; the source supplies `probe` (event time of the record at an offset).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

Probe = Callable[[Mapping[str, int]], Mapping[str, int]]


def align_on_event_time(
    begin: Mapping[str, int], planned: Mapping[str, int], probe: Probe
) -> dict[str, int]:
    """Shrink the planned end offsets so no partition ends past the slowest one's event time."""
    live = {p: planned[p] for p in planned if planned[p] > begin[p]}
    if len(live) < 2:
        return dict(planned)
    reached = probe({p: end - 1 for p, end in live.items()})
    target = min(reached.values())
    low = {p: begin[p] for p in live if reached[p] > target}  # cut reading nothing
    high = {p: live[p] - 1 for p in low}  # the planned end is known to reach past target
    while any(low[p] < high[p] for p in low):
        middle = {p: (low[p] + high[p] + 1) // 2 for p in low if low[p] < high[p]}
        times = probe({p: cut - 1 for p, cut in middle.items()})
        for p, cut in middle.items():
            if times[p] <= target:
                low[p] = cut
            else:
                high[p] = cut - 1
    return {p: low.get(p, planned[p]) for p in planned}
