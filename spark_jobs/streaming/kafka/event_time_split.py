"""Admission control aligned on event time: cut every partition, of every topic read together,
at (about) the same event time instead of the same share of its backlog.

Why: Spark's watermark is global. When partitions differ in density (a spammer, a hot key,
ramped experiments), a proportional split lets the sparse partitions run ahead in event time
and the dense partition's next records arrive behind the watermark: late, not counted. The
same holds across topics: if the job writing one input topic lags (or is restarted), the other
topic must not run ahead of it. So a plan is first guessed (all available, or a proportional
share of the limit); then the target time is the slowest topic's progress, and partitions
that reach past it are cut back by binary search over their offsets.

A topic with nothing new in this plan holds the others back at the time of its last consumed
record, unless it is exhausted (an available-now run has read all it will ever read). The plan
never reads more than the guess and, within an available-now run, always progresses. This is
pure logic; the source supplies `probe` (event time of the record at an offset).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

Probe = Callable[[Mapping[str, int]], Mapping[str, int]]


def _single_topic(_key: str) -> str:
    return ""


def _topic_times(
    begin: Mapping[str, int], planned: Mapping[str, int], first: Mapping[str, int],
    reached: Mapping[str, int], probe: Probe, topic_of: Callable[[str], str],
    exhausted: Collection[str],
) -> list[int | None]:
    """How far each topic that matters will have got: its slowest live partition, or for a
    topic with nothing new, its furthest consumed record (None: it never had any)."""
    times: list[int | None] = []
    for topic in {topic_of(key) for key in planned}:
        if topic in exhausted:
            continue
        keys = [key for key in planned if topic_of(key) == topic]
        live = [key for key in keys if key in reached]
        if live:
            times.append(min(reached[key] for key in live))
            continue
        consumed = {key: begin[key] - 1 for key in keys if begin[key] > first.get(key, 0)}
        last = probe(consumed) if consumed else {}
        times.append(max(last.values()) if last else None)
    return times


def align_on_event_time(
    begin: Mapping[str, int],
    planned: Mapping[str, int],
    probe: Probe,
    topic_of: Callable[[str], str] = _single_topic,
    exhausted: Collection[str] = (),
    first: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """Shrink the planned end offsets so no partition ends past the slowest topic's time."""
    live = {key: end for key, end in planned.items() if end > begin[key]}
    if not live:
        return dict(planned)
    reached = probe({key: end - 1 for key, end in live.items()})
    times = _topic_times(begin, planned, first or {}, reached, probe, topic_of, exhausted)
    if not times:
        return dict(planned)
    if any(time is None for time in times):
        return dict(begin)  # a topic that never had data: wait for it
    target = min(t for t in times if t is not None)
    low = {key: begin[key] for key in live if reached[key] > target}  # cut reading nothing
    high = {key: live[key] - 1 for key in low}  # the planned end is known to reach past it
    while any(low[key] < high[key] for key in low):
        middle = {key: (low[key] + high[key] + 1) // 2 for key in low if low[key] < high[key]}
        times_at = probe({key: cut - 1 for key, cut in middle.items()})
        for key, cut in middle.items():
            if times_at[key] <= target:
                low[key] = cut
            else:
                high[key] = cut - 1
    return {key: low.get(key, planned[key]) for key in planned}
