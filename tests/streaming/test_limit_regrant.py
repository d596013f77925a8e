"""The per-trigger limit's unused part goes to the partitions that hold event time back."""

from __future__ import annotations

from spark_jobs.streaming.kafka.event_time_split import align_on_event_time
from spark_jobs.streaming.kafka.limit_regrant import fill_limit, regranted
from spark_jobs.streaming.kafka.stream_reader import split_limit


def _topic(key: str) -> str:
    return key.split(":")[0]


def _plan(begin: dict[str, int], ends: dict[str, int], times: dict[str, list[int]],
          limit: int) -> dict[str, int]:
    """What the reader plans: proportional split, alignment, then fill_limit."""
    available = {key: ends[key] - begin[key] for key in ends}
    take = split_limit(available, limit)
    planned = {key: begin[key] + take[key] for key in ends}

    def probe(offsets: dict[str, int]) -> dict[str, int]:
        return {key: times[key][at] for key, at in offsets.items()}

    def align(guess: dict[str, int]) -> dict[str, int]:
        return align_on_event_time(begin, guess, probe, _topic)

    return fill_limit(begin, ends, planned, align(planned), limit, align, split_limit, _topic)


def test_a_small_topic_far_behind_is_read_whole_in_one_batch() -> None:
    # ten rules before 600 transactions in two partitions, limit 200: the proportional share
    # of the rules is 3, which would cut the transactions to nothing batch after batch
    times = {"rules:0": list(range(10)),
             "tx:0": list(range(100, 400)), "tx:1": list(range(100, 400))}
    begin = dict.fromkeys(times, 0)
    ends = {key: len(t) for key, t in times.items()}
    assert _plan(begin, ends, times, 200) == {"rules:0": 10, "tx:0": 0, "tx:1": 0}


def test_interleaved_topics_fill_the_limit_and_stay_aligned() -> None:
    # rules every 10 ms, transactions every 1 ms, over the same second
    times = {"rules:0": list(range(0, 1000, 10)), "tx:0": list(range(1000)),
             "tx:1": list(range(1000))}
    begin = dict.fromkeys(times, 0)
    ends = {key: len(t) for key, t in times.items()}
    plan = _plan(begin, ends, times, 500)
    read = sum(plan[k] - begin[k] for k in plan)
    assert read <= 500
    last = {key: times[key][plan[key] - 1] for key in plan if plan[key] > begin[key]}
    assert max(last.values()) - min(last.values()) <= 10  # cut on (about) the same time
    assert read >= 400  # not one rule's share of it


def test_nothing_changes_when_the_limit_is_used() -> None:
    begin = {"a:0": 0, "b:0": 0}
    assert regranted(begin, {"a:0": 10, "b:0": 10}, {"a:0": 5, "b:0": 5},
                     {"a:0": 5, "b:0": 5}, 10, split_limit, _topic) is None


def test_only_partitions_that_used_their_share_and_have_more_grow() -> None:
    begin = {"a:0": 0, "b:0": 0, "c:0": 0}
    ends = {"a:0": 4, "b:0": 100, "c:0": 100}
    planned = {"a:0": 1, "b:0": 10, "c:0": 10}
    aligned = {"a:0": 1, "b:0": 2, "c:0": 10}  # b was cut back by time
    guess = regranted(begin, ends, planned, aligned, 21, split_limit, _topic)
    assert guess is not None
    assert guess["b:0"] == 10  # cut by time: its share is not what limits it
    assert 1 < guess["a:0"] <= 4  # grows, never past what it has
    assert guess["c:0"] > 10
    assert sum(guess.values()) <= 21 + sum(planned.values())


def test_partitions_of_a_topic_that_was_cut_get_nothing_more():
    # one topic, p1 cut back to p0's time: the proportional split already keeps them even, and
    # growing p0 would only cost probes
    begin = {"tx:0": 0, "tx:1": 0}
    ends = {"tx:0": 100, "tx:1": 100}
    planned = {"tx:0": 10, "tx:1": 10}
    assert regranted(begin, ends, planned, {"tx:0": 10, "tx:1": 7}, 20, split_limit,
                     _topic) is None
