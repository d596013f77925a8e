"""compare_alerts: pairing by (rule, transaction), per-field differences, repeats, the day and
the evaluations left out."""

from __future__ import annotations

import json
from typing import Any

from spark_jobs.fraud.shadow.compare import (
    DIFFERS,
    EXTRA_IN_STREAMING,
    MISSING_IN_STREAMING,
    compare_alerts,
    decidable,
    differing_fields,
    in_day,
)


def _alert(rule_id: int, transaction_id: str, aggregate: str = "110", offset: int = 0,
           **fields: Any) -> dict[str, Any]:
    return {"rule_id": rule_id, "transaction_id": transaction_id,
            "grouping_key": "{payeeId=1}", "aggregate": aggregate, "limit": "100",
            "event_time": 1_000, "topic": "transactions", "partition": 0, "offset": offset,
            **fields}


def test_identical_sides_agree() -> None:
    rows = [_alert(1, "2"), _alert(2, "2"), _alert(1, "3", offset=1)]
    report = compare_alerts(rows, list(reversed(rows)))
    assert (report.expected_alerts, report.streaming_alerts, report.matched) == (3, 3, 3)
    assert report.match_rate == 1.0 and report.agrees and report.examples == []
    assert json.loads(json.dumps(report.as_dict()))["agrees"] is True


def test_nothing_on_either_side_agrees() -> None:
    report = compare_alerts([], [])
    assert report.match_rate == 1.0 and report.agrees


def test_counts_fields_and_examples() -> None:
    expected = [_alert(1, "1"), _alert(1, "2"), _alert(2, "2", limit="3"), _alert(3, "9")]
    streaming = [
        _alert(1, "1"),  # matches
        _alert(1, "2", aggregate="110.0"),  # the engine's text is compared, not the value
        _alert(2, "2", limit="4", grouping_key="{beneficiaryId=9}"),
        _alert(4, "5"),  # no such alert expected
    ]
    report = compare_alerts(streaming, expected, max_examples=3)
    assert (report.matched, report.differing, report.missing_in_streaming,
            report.extra_in_streaming) == (1, 2, 1, 1)
    assert report.field_differences == {"grouping_key": 1, "aggregate": 1, "limit": 1}
    assert report.match_rate == 1 / 5, "one matched among the five alerts of either side"
    assert not report.agrees
    kinds = [(e.kind, e.rule_id, e.transaction_id) for e in report.examples]
    assert kinds == [(DIFFERS, 1, "2"), (MISSING_IN_STREAMING, 3, "9"),
                     (EXTRA_IN_STREAMING, 4, "5")], "one of each kind first"
    assert report.examples[0].fields == ["aggregate"]


def test_an_alert_written_twice_is_a_duplicate() -> None:
    expected = [_alert(1, "2")]
    streaming = [_alert(1, "2", offset=0), _alert(1, "2", offset=0)]
    report = compare_alerts(streaming, expected)
    assert (report.matched, report.extra_in_streaming, report.duplicates_in_streaming) == (1, 1, 1)
    assert report.match_rate == 0.5 and not report.agrees


def test_a_key_repeated_on_both_sides_pairs_in_offset_order() -> None:
    """Transaction ids 1 and "1" are two transactions to the engine, one text in the table."""
    expected = [_alert(1, "1", aggregate="5", offset=3), _alert(1, "1", aggregate="7", offset=8)]
    streaming = list(reversed(expected))
    report = compare_alerts(streaming, expected)
    assert report.agrees and report.duplicates_in_streaming == 0


def test_differing_fields_names_only_the_compared_ones() -> None:
    a = _alert(1, "1")
    assert differing_fields(a, {**a, "event_time": 5, "offset": 9}) == []
    assert differing_fields(a, {**a, "limit": "1", "grouping_key": "{}"}) == [
        "grouping_key", "limit"]


def test_the_day_is_the_transactions_event_time() -> None:
    rows = [_alert(1, "a", event_time=999), _alert(1, "b", event_time=1_000),
            _alert(1, "c", event_time=1_999), _alert(1, "d", event_time=2_000),
            _alert(1, "e", event_time=None)]
    assert [r["transaction_id"] for r in in_day(rows, 1_000, 2_000)] == ["b", "c"]


def test_evaluations_left_out_are_counted() -> None:
    rows = [_alert(1, "1", offset=4), _alert(2, "1", offset=4), _alert(1, "2", offset=5)]
    kept, left_out = decidable(iter(rows), {(1, "transactions", 0, 4)})
    assert [(r["rule_id"], r["offset"]) for r in kept] == [(2, 4), (1, 5)]
    assert left_out == 1
    report = compare_alerts(kept, kept, left_out=left_out)
    assert report.agrees and report.left_out == 1
