"""Drop counts (CONTRACTS section 9): per batch from the sink and observed metrics, totals
per job once per batch id of a checkpoint lineage."""

from collections import Counter

from spark_jobs.streaming.drops import (
    add_batch,
    add_late,
    describe_drops,
    note_batch,
    observed_counts,
    read_totals,
    take_batch,
    take_untaken,
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


def test_counts_learnt_after_their_batchs_progress_reach_the_totals_once(tmp_path):
    """fraud's driver mode delivers its last batch when its sink closes, after Spark
    reported the batch: those counts go to the totals beside the listener's, once."""
    note_batch("job-c", 7, {"duplicate": 2})
    note_batch("job-c", 8, {"late": 1})
    assert add_batch(tmp_path, "c", "lineage-1", 7, Counter({"future": 1})) == {"future": 1}
    untaken = take_untaken("job-c")
    assert untaken == {7: Counter({"duplicate": 2}), 8: Counter({"late": 1})}
    assert take_untaken("job-c") == {}
    for batch_id, counts in untaken.items():
        add_late(tmp_path, "c", "lineage-1", batch_id, counts)
    assert add_late(tmp_path, "c", "lineage-1", 8, Counter({"late": 1})) == {
        "future": 1, "duplicate": 2, "late": 1}  # added once
    # the listener's bookkeeping survives beside the late one
    assert add_batch(tmp_path, "c", "lineage-1", 7, Counter({"future": 1}))["future"] == 1
    assert add_batch(tmp_path, "c", "lineage-1", 9, Counter({"late": 5}))["late"] == 6
    assert read_totals(tmp_path, "c") == {"future": 1, "duplicate": 2, "late": 6}


def test_description_lists_the_largest_first():
    assert describe_drops({"late": 3, "capped": 10, "zero": 0}) == "capped 10, late 3"
    assert describe_drops({}) == "none"
