"""Give the unused part of a per-trigger limit to the partitions that hold event time back.

Why: the limit is first split across partitions in proportion to their backlog
(stream_reader.split_limit), then every partition is cut back to the slowest topic's event
time (event_time_split). When one topic has a tiny backlog far behind the others in event time
(ten rules before sixty thousand transactions), its proportional share is a record or two, the
others are cut back to that record's time, and each micro-batch reads a record or two: ten
rules cost five or six batches before any transaction is read. Here the unused part of the
limit goes to the partitions that used their whole share and have more (they set the cut), and
the plan is aligned again; the plan is kept only while it reads more and stays within the
limit. Only partitions of topics that were not cut themselves get more: between partitions of
one topic the proportional split already advances event time evenly, and regranting there
only cost event-time probes (150-250 ms per batch on a loaded box) without reading more. This
is pure logic: the reader supplies the alignment.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

Plan = Mapping[str, int]
MAX_ROUNDS = 3  # each round costs an alignment (event-time probes); one or two suffice


def _read(begin: Plan, plan: Plan) -> int:
    return sum(plan[key] - begin[key] for key in plan)


def regranted(begin: Plan, ends: Plan, planned: Plan, aligned: Plan, limit: int,
              split: Callable[[dict[str, int], int], dict[str, int]],
              topic_of: Callable[[str], str]) -> dict[str, int] | None:
    """A new guess giving the limit's unused part to the partitions whose aligned end is their
    whole share, that have more to read and whose topic was not cut (in proportion to what
    they have left, `split`); None when nothing is unused or no such partition exists."""
    spare = limit - _read(begin, aligned)
    cut = {topic_of(key) for key in planned if aligned[key] < planned[key]}
    holding = {key: ends[key] - planned[key] for key in planned
               if aligned[key] == planned[key] < ends[key] and topic_of(key) not in cut}
    if spare <= 0 or not holding:
        return None
    extra = split(holding, spare)
    return {key: planned[key] + extra.get(key, 0) for key in planned}


def fill_limit(begin: Plan, ends: Plan, planned: Plan, aligned: Plan, limit: int,
               align: Callable[[dict[str, int]], dict[str, int]],
               split: Callable[[dict[str, int], int], dict[str, int]],
               topic_of: Callable[[str], str]) -> dict[str, int]:
    """The aligned plan, grown (regranted, then `align`ed) while that reads more records and
    never more than `limit`."""
    best_guess, best = dict(planned), dict(aligned)
    for _ in range(MAX_ROUNDS):
        guess = regranted(begin, ends, best_guess, best, limit, split, topic_of)
        if guess is None:
            break
        candidate = align(guess)
        if not _read(begin, best) < _read(begin, candidate) <= limit:
            break
        best_guess, best = guess, candidate
    return best
