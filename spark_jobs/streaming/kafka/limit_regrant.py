"""Give the unused part of a per-trigger limit to the partitions that hold event time back.

Why: the limit is first split across partitions in proportion to their backlog
(stream_reader.split_limit), then every partition is cut back to the slowest topic's event
time (event_time_split). When one topic has a tiny backlog far behind the others in event time
(ten rules before sixty thousand transactions), its proportional share is a record or two, the
others are cut back to that record's time, and each micro-batch reads a record or two: ten
rules cost ten batches before any transaction is read. Here the unused part of the limit goes
to the partitions that used their whole share and have more (they set the cut), and the plan
is aligned again; the plan is kept only while it reads more and stays within the limit. This
is pure logic: the reader supplies the alignment.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

Plan = Mapping[str, int]
MAX_ROUNDS = 3  # each round costs an alignment (event-time probes); one or two suffice


def _read(begin: Plan, plan: Plan) -> int:
    return sum(plan[key] - begin[key] for key in plan)


def regranted(begin: Plan, ends: Plan, planned: Plan, aligned: Plan, limit: int,
              split: Callable[[dict[str, int], int], dict[str, int]]) -> dict[str, int] | None:
    """A new guess giving the limit's unused part to the partitions whose aligned end is their
    whole share and that have more to read (in proportion to what they have left, `split`);
    None when nothing is unused or no such partition exists."""
    spare = limit - _read(begin, aligned)
    holding = {key: ends[key] - planned[key] for key in planned
               if aligned[key] == planned[key] < ends[key]}
    if spare <= 0 or not holding:
        return None
    extra = split(holding, spare)
    return {key: planned[key] + extra.get(key, 0) for key in planned}


def fill_limit(begin: Plan, ends: Plan, planned: Plan, aligned: Plan, limit: int,
               align: Callable[[dict[str, int]], dict[str, int]],
               split: Callable[[dict[str, int], int], dict[str, int]]) -> dict[str, int]:
    """The aligned plan, grown (regranted, then `align`ed) while that reads more records and
    never more than `limit`."""
    best_guess, best = dict(planned), dict(aligned)
    for _ in range(MAX_ROUNDS):
        guess = regranted(begin, ends, best_guess, best, limit, split)
        if guess is None:
            break
        candidate = align(guess)
        if not _read(begin, best) < _read(begin, candidate) <= limit:
            break
        best_guess, best = guess, candidate
    return best
