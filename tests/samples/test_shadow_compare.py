"""compare_samples: counts, per-field differences, semantic context, schemas, period filter."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from spark_jobs.contracts.tables import training_samples
from spark_jobs.samples.shadow.compare import (
    DIFFERS,
    EXTRA_IN_STREAMING,
    MISSING_IN_STREAMING,
    compare_samples,
    compare_schemas,
    differing_fields,
    in_period,
)

SIGNALS = ("like", "share", "comment")


def sample_schema(signals) -> pa.Schema:
    return training_samples(signals).arrow_schema()


def _sample(view_id: str, ts: int = 1000, context: str = '{"a":1,"b":[1,2]}',
            **labels: int) -> dict[str, Any]:
    return {
        "sample_id": view_id, "view_id": view_id, "user_id": 7, "post_id": 9, "ts": ts,
        "context": context, "labels": {s: labels.get(s, 0) for s in SIGNALS},
    }


def test_identical_sides_agree() -> None:
    rows = [_sample("v1", like=1), _sample("v2")]
    table = pa.Table.from_pylist(rows, schema=sample_schema(SIGNALS))
    report = compare_samples(table, table, SIGNALS)
    assert (report.batch_samples, report.streaming_samples, report.matched) == (2, 2, 2)
    assert report.match_rate == 1.0
    assert report.schema.agrees and report.agrees
    assert report.examples == []
    assert json.loads(json.dumps(report.as_dict()))["agrees"] is True


def test_counts_and_examples() -> None:
    batch = [
        _sample("same", like=1),
        _sample("reordered", context='{"a":1,"b":[1,2]}'),
        _sample("label", share=1),
        _sample("two", ts=5, comment=1),
        _sample("gone"),
    ]
    streaming = [
        _sample("same", like=1),
        _sample("reordered", context='{ "b": [1, 2], "a": 1 }'),  # same JSON: matches
        _sample("label"),  # share 0 instead of 1
        _sample("two", ts=6),  # ts and a label
        _sample("extra"),
        _sample("same", like=1),  # written twice: samples are never rewritten
    ]
    report = compare_samples(streaming, batch, SIGNALS, max_examples=3)
    assert report.batch_samples == 5
    assert report.streaming_samples == 6
    assert report.matched == 2
    assert report.differing == 2
    assert report.missing_in_streaming == 1
    assert report.extra_in_streaming == 1
    assert report.duplicates_in_streaming == 1
    assert report.duplicates_in_batch == 0
    assert report.match_rate == 2 / 6, "matched over the samples of either side (5 + 1 extra)"
    assert report.field_differences == {
        "view_id": 0, "user_id": 0, "post_id": 0, "ts": 1, "context": 0,
        "labels.like": 0, "labels.share": 1, "labels.comment": 1,
    }
    # One example of each kind first, whatever their number.
    assert [(d.kind, d.sample_id) for d in report.examples] == [
        (DIFFERS, "label"), (MISSING_IN_STREAMING, "gone"), (EXTRA_IN_STREAMING, "extra"),
    ]
    assert report.examples[0].fields == ["labels.share"]
    assert report.examples[0].batch == _sample("label", share=1)
    assert not report.agrees
    assert compare_samples([], [], SIGNALS).match_rate == 1.0  # nothing to disagree on
    only_streaming = compare_samples([{"sample_id": "s"}], [], SIGNALS)
    assert only_streaming.match_rate == 0.0


def test_field_rules() -> None:
    base = _sample("v", like=1)
    assert differing_fields(base, dict(base), SIGNALS) == []
    assert differing_fields({**base, "context": "{bad"}, {**base, "context": "{bad"},
                            SIGNALS) == []
    assert differing_fields({**base, "context": "{bad"}, base, SIGNALS) == ["context"]
    assert differing_fields({**base, "context": '{"a":1.0,"b":[1,2]}'}, base, SIGNALS) == []
    assert differing_fields({**base, "user_id": True}, {**base, "user_id": 1}, SIGNALS) == [
        "user_id"
    ]
    assert differing_fields({**base, "labels": {"like": True, "share": 0, "comment": 0}}, base,
                            SIGNALS) == []
    missing = {**base, "labels": {"like": 1, "share": 0}}
    assert differing_fields(missing, base, SIGNALS) == ["labels.comment"]
    extra = {**base, "labels": {**base["labels"], "skip": 0}}
    assert differing_fields(extra, base, SIGNALS) == ["labels.skip"]
    assert differing_fields({**base, "labels": None}, base, SIGNALS) == ["labels.like",
                                                                        "labels.share",
                                                                        "labels.comment"]


def test_schemas() -> None:
    expected = sample_schema(SIGNALS)
    assert compare_schemas(expected, expected, SIGNALS).agrees
    assert compare_schemas(None, None, SIGNALS).agrees  # nothing given, nothing checked
    large = pa.schema([f.with_type(pa.large_string()) if f.type == pa.string() else f
                       for f in expected])
    assert compare_schemas(large, expected, SIGNALS).agrees  # string flavours are one type

    reordered_labels = sample_schema(("share", "like", "comment"))
    check = compare_schemas(reordered_labels, expected, SIGNALS)
    assert not check.agrees
    assert check.problems == [
        "streaming: 'labels: struct<share: int32, like: int32, comment: int32>' "
        "(expected 'labels: struct<like: int32, share: int32, comment: int32>')"
    ]
    swapped = pa.schema([expected.field(1), expected.field(0), *list(expected)[2:]])
    check = compare_schemas(expected, swapped, SIGNALS)
    assert [p.split(":")[0] for p in check.problems] == ["batch"]
    assert check.batch is not None and check.batch[0] == "view_id: string"
    short = pa.schema(list(expected)[:-1])
    check = compare_schemas(short, expected, SIGNALS)
    assert check.problems == ["streaming: 6 fields, expected 7"]
    narrow_ts = expected.set(4, pa.field("ts", pa.int32()))
    report = compare_samples(pa.Table.from_pylist([], narrow_ts),
                             pa.Table.from_pylist([], expected), SIGNALS)
    assert not report.schema.agrees and "ts: int32" in report.schema.problems[0]


def test_in_period() -> None:
    rows = [_sample(f"v{ts}", ts=ts) for ts in (99, 100, 150, 199, 200)]
    assert [r["ts"] for r in in_period(rows, 100, 200)] == [100, 150, 199]
    table = pa.Table.from_pylist(rows, schema=sample_schema(SIGNALS))
    filtered = in_period(table, 100, 200)
    assert isinstance(filtered, pa.Table)
    assert filtered.column("ts").to_pylist() == [100, 150, 199]


def test_a_view_re_sent_after_the_ttl_is_a_second_sample_of_its_id() -> None:
    """CONTRACTS section 9: a view_id seen again after samples.dedup_ttl is a new view, so
    both sides may hold its id twice, at two ts: that is agreement, not a duplicate."""
    batch = [_sample("v", ts=1_000, like=1), _sample("v", ts=90_000_000), _sample("w")]
    report = compare_samples(list(reversed(batch)), batch, SIGNALS)
    assert (report.matched, report.duplicates_in_streaming, report.batch_samples) == (3, 0, 3)
    assert report.agrees

    only_first = compare_samples(batch[:1] + batch[2:], batch, SIGNALS)
    assert (only_first.matched, only_first.missing_in_streaming) == (2, 1)
    assert [(d.kind, d.batch["ts"]) for d in only_first.examples] == [
        (MISSING_IN_STREAMING, 90_000_000)]

    written_twice = compare_samples([*batch, batch[1]], batch, SIGNALS)
    assert (written_twice.matched, written_twice.duplicates_in_streaming) == (3, 1)
    assert not written_twice.agrees

    wrong_ts = compare_samples([batch[0], _sample("v", ts=90_000_001), batch[2]], batch,
                               SIGNALS)
    assert (wrong_ts.matched, wrong_ts.differing, wrong_ts.missing_in_streaming,
            wrong_ts.extra_in_streaming) == (2, 1, 0, 0)
    assert wrong_ts.field_differences["ts"] == 1 and not wrong_ts.agrees

    re_sent_only_in_streaming = compare_samples(batch, batch[:1] + batch[2:], SIGNALS)
    assert (re_sent_only_in_streaming.matched,
            re_sent_only_in_streaming.extra_in_streaming) == (2, 1)

    kept_within_ttl = compare_samples([*batch, _sample("w", ts=2_000)], batch, SIGNALS)
    assert (kept_within_ttl.matched, kept_within_ttl.extra_in_streaming,
            kept_within_ttl.duplicates_in_streaming) == (3, 1, 1), \
        "a second sample of w that the batch does not have: the de-duplication missed it"


def test_samples_left_over_pair_by_the_nearest_ts() -> None:
    batch = [_sample("v", ts=1_000), _sample("v", ts=90_000_000)]
    report = compare_samples([_sample("v", ts=90_000_001)], batch, SIGNALS)
    assert (report.differing, report.missing_in_streaming) == (1, 1)
    assert [(d.kind, d.batch["ts"]) for d in report.examples] == [
        (DIFFERS, 90_000_000), (MISSING_IN_STREAMING, 1_000)]
    assert report.field_differences["ts"] == 1

    no_ts = compare_samples([_sample("v", ts=None), _sample("u", ts=None)], batch, SIGNALS)
    assert (no_ts.differing, no_ts.missing_in_streaming, no_ts.extra_in_streaming) == (1, 1, 1)
    assert [(d.kind, d.sample_id) for d in no_ts.examples] == [
        (DIFFERS, "v"), (MISSING_IN_STREAMING, "v"), (EXTRA_IN_STREAMING, "u")]
