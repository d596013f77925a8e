"""Event-time-aligned admission control: partitions are cut back to the slowest one's time."""

from __future__ import annotations

from spark_jobs.streaming.kafka.event_time_split import align_on_event_time


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
    assert align_on_event_time({"0": 3}, {"0": 3}, probe) == {"0": 3}
    assert len(calls) == 1  # nothing to read needs no probe


def _topic(key: str) -> str:
    return key.split("/")[0]


def test_a_topic_ahead_waits_for_the_other_topic():
    """filtered events ran ahead of filtered activations: cut back to the activations' time."""
    times = {"e/0": list(range(0, 100)), "a/0": list(range(0, 50, 5))}
    probe, _ = _probe(times)
    aligned = align_on_event_time(
        {"e/0": 0, "a/0": 0}, {"e/0": 100, "a/0": 10}, probe, _topic
    )
    assert aligned == {"e/0": 46, "a/0": 10}  # activations reached t=45


def test_a_topic_with_nothing_new_holds_the_others_at_its_last_record():
    times = {"e/0": list(range(0, 100)), "a/0": list(range(0, 50, 5))}
    probe, _ = _probe(times)
    aligned = align_on_event_time(
        {"e/0": 20, "a/0": 10}, {"e/0": 100, "a/0": 10}, probe, _topic, first={"a/0": 0}
    )
    assert aligned == {"e/0": 46, "a/0": 10}  # last activation read has t=45


def test_an_exhausted_topic_does_not_hold_an_available_now_run_back():
    times = {"e/0": list(range(0, 100)), "a/0": list(range(0, 50, 5))}
    probe, _ = _probe(times)
    aligned = align_on_event_time(
        {"e/0": 20, "a/0": 10}, {"e/0": 100, "a/0": 10}, probe, _topic, exhausted={"a"}
    )
    assert aligned == {"e/0": 100, "a/0": 10}


def test_a_topic_that_never_had_data_stops_the_others_until_it_has():
    times = {"e/0": list(range(0, 100)), "a/0": []}
    probe, _ = _probe(times)
    aligned = align_on_event_time(
        {"e/0": 0, "a/0": 0}, {"e/0": 100, "a/0": 0}, probe, _topic, first={"a/0": 0}
    )
    assert aligned == {"e/0": 0, "a/0": 0}
