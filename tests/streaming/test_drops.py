"""Drop counts (CONTRACTS section 9): per batch from the sink and observed metrics, totals
per job once per batch id of a checkpoint lineage."""

from collections import Counter

from spark_jobs.streaming.drops import (
    add_batch,
    describe_drops,
    note_batch,
    observed_counts,
    read_totals,
    take_batch,
)


def test_the_sink_notes_a_batch_and_the_listener_takes_it_once():
    note_batch("job-a", 3, {"late": 2, "malformed": 0})
    assert take_batch("job-a", 3) == Counter({"late": 2})
    assert take_batch("job-a", 3) == Counter()


def test_counts_of_a_batch_whose_progress_never_came_join_the_next():
    note_batch("job-b", 1, {"capped": 1})
    note_batch("job-b", 2, {"capped": 4})
    assert take_batch("job-b", 2) == Counter({"capped": 5})


def test_observed_metrics_named_drops_are_counts_by_reason():
    progress = {"observedMetrics": {"drops": {"non_critical_type": 7, "zero": 0},
                                    "other": {"x": 1}}}
    assert observed_counts(progress) == Counter({"non_critical_type": 7})
    assert observed_counts({}) == Counter()


def test_totals_add_each_batch_of_a_lineage_once(tmp_path):
    assert add_batch(tmp_path, "j", "lineage-1", 0, Counter({"late": 1})) == {"late": 1}
    assert add_batch(tmp_path, "j", "lineage-1", 0, Counter({"late": 1})) == {"late": 1}
    assert add_batch(tmp_path, "j", "lineage-1", 1, Counter({"future": 2})) == {
        "late": 1, "future": 2}
    # a reset checkpoint starts batch ids again: its batches still count
    assert add_batch(tmp_path, "j", "lineage-2", 0, Counter({"late": 3}))["late"] == 4
    assert read_totals(tmp_path, "j") == {"late": 4, "future": 2}
    assert read_totals(tmp_path, "other") == {}


def test_description_lists_the_largest_first():
    assert describe_drops({"late": 3, "capped": 10, "zero": 0}) == "capped 10, late 3"
    assert describe_drops({}) == "none"
