"""Event-time-aligned admission control: partitions are cut back to the slowest one's time."""

from __future__ import annotations

from spark_jobs.kafka.event_time_split import align_on_event_time


def _probe(times: dict[str, list[int]]):
    calls = []

    def probe(offsets):
        calls.append(dict(offsets))
        return {p: times[p][o] for p, o in offsets.items()}

    return probe, calls


def test_partition_ahead_in_event_time_is_cut_back_to_the_slowest():
    # p0 is dense (one record per second), p1 sparse (one per 10 s): same share, unequal time
    times = {"0": list(range(0, 100)), "1": list(range(0, 1000, 10))}
    probe, _ = _probe(times)
    aligned = align_on_event_time({"0": 0, "1": 0}, {"0": 50, "1": 50}, probe)
    assert aligned["0"] == 50  # slowest keeps its share: it reached t=49
    assert aligned["1"] == 5  # records 0..4 have t <= 49, record 5 has t = 50
    assert times["1"][aligned["1"] - 1] <= times["0"][49] < times["1"][aligned["1"]]


def test_never_reads_more_than_planned_and_keeps_progress():
    times = {"0": [5, 6, 7, 8], "1": [1, 2, 3, 4], "2": []}
    probe, _ = _probe(times)
    aligned = align_on_event_time({"0": 0, "1": 0, "2": 0}, {"0": 4, "1": 4, "2": 0}, probe)
    assert aligned == {"0": 0, "1": 4, "2": 0}  # p0 starts after the slowest reached: wait


def test_out_of_order_records_still_give_a_cut_near_the_target():
    times = {"0": [0, 10, 20, 30, 40], "1": [0, 12, 8, 25, 22, 35, 50, 45, 60, 70]}
    probe, _ = _probe(times)
    aligned = align_on_event_time({"0": 0, "1": 0}, {"0": 5, "1": 10}, probe)
    assert aligned["0"] == 5
    assert 30 <= times["1"][aligned["1"] - 1] <= 45


def test_single_partition_or_nothing_to_read_is_left_alone():
    probe, calls = _probe({"0": [1, 2, 3]})
    assert align_on_event_time({"0": 0}, {"0": 3}, probe) == {"0": 3}
    assert calls == []
