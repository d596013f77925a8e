"""The batch recomputation of training samples (shadow/recompute.py) on small raw inputs:
every rule on handcrafted rows, then random rows against a brute-force reference."""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

import pytest
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql.types import IntegerType, LongType, StringType, StructType

from spark_jobs.samples.shadow.recompute import (
    SAMPLE_COLUMNS,
    engagement_outcomes,
    recompute_orphans,
    recompute_samples,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark]
SIGNALS = ("share", "like", "comment", "play")  # config order, not alphabetical
WINDOW = 1000
RAW = "value {kind}, kafka_partition int, kafka_offset long"

Raw = tuple[int, int, Any]  # (partition, offset, JSON value or raw text)


def _frame(spark: SparkSession, rows: list[Raw], binary: bool = False) -> DataFrame:
    def text(value: Any) -> Any:
        encoded = value if isinstance(value, str) else json.dumps(value)
        return bytearray(encoded.encode()) if binary else encoded

    data = [(text(v), p, o) for p, o, v in rows]
    return spark.createDataFrame(data, RAW.format(kind="binary" if binary else "string"))


def _view(view_id: Any, user: Any, post: Any, ts: Any, **context: Any) -> dict[str, Any]:
    return {"view_id": view_id, "user_id": user, "post_id": post, "ts": ts, **context}


def _eng(user: Any, post: Any, view_id: Any, signal: Any, ts: Any) -> dict[str, Any]:
    return {"user_id": user, "post_id": post, "view_id": view_id, "signal": signal, "ts": ts}


def _sample_tuples(rows: list[Row]) -> list[tuple[Any, ...]]:
    """Rows as comparable tuples; context as canonical JSON (compared semantically)."""
    out = []
    for row in rows:
        labels = row.labels.asDict()
        assert list(labels) == list(SIGNALS)
        out.append((
            row.sample_id, row.view_id, row.user_id, row.post_id, row.ts,
            json.dumps(json.loads(row.context), sort_keys=True),
            tuple(labels[s] for s in SIGNALS),
        ))
    return sorted(out)


def _expected(view_id: str, user: int, post: int, ts: int, context: dict[str, Any],
              *signals: str) -> tuple[Any, ...]:
    labels = tuple(int(s in signals) for s in SIGNALS)
    return (view_id, view_id, user, post, ts, json.dumps(context, sort_keys=True), labels)


HAND_VIEWS: list[Raw] = [
    (0, 0, _view("v1", 1, 10, 1000, lang="hi", score=0.5, tags=["a", "b"])),
    (0, 1, _view("v2", 1, 11, 1000, lang="en")),
    (0, 2, _view("v1", 1, 12, 1500, lang="xx")),  # duplicate: dropped (first arrival wins)
    (0, 3, _view("v3a", 2, 20, 5000)),
    (0, 4, _view("v3b", 2, 20, 5000, n=2)),  # same ts, later offset
    (0, 5, _view("v4", 3, 30, 9000, nested={"k": [1, {"z": None}]}, ü="ä")),
    (0, 6, _view("", 1, 1, 1)),  # malformed views from here ...
    (0, 7, _view("vb", True, 1, 1)),
    (0, 8, "not json"),
    (0, 9, "[1, 2]"),
    (0, 10, _view("vf", 1, 2, -5)),
    (0, 11, _view("vg", "5", 2, 5)),
    (0, 12, _view("vh", 1, 2, 1.5)),
    (0, 13, {"user_id": 1, "post_id": 2, "ts": 3}),  # ... to here
    (0, 14, _view("v7", 5, 50, 20_000)),
    (0, 15, _view("w1", 7, 70, 300)),
    (1, 0, _view("v5", 4, 40, 100)),
    (1, 1, _view("v6", 4, 40, 600)),
    (1, 5, _view("w0", 7, 70, 300)),  # same ts as w1: the later (partition, offset) wins
    (1, 6, _view("shared", 8, 80, 10)),  # one view_id, two users: the first arrival wins
    (1, 7, _view("shared", 9, 90, 10)),
]
HAND_ENGAGEMENTS: list[Raw] = [
    (0, 0, _eng(1, 10, "v1", "like", 1200)),
    (0, 1, _eng(1, 10, "v1", "like", 1300)),  # same signal again: still 1
    (0, 2, _eng(1, 10, None, "share", 1999)),  # latest view of (1, 10) at or before: v1
    (0, 3, _eng(1, 10, "v1", "comment", 2000)),  # orphan outside_window (end excluded)
    (0, 4, _eng(1, 10, "v1", "comment", 999)),  # orphan outside_window (before the view)
    (0, 5, {"user_id": 1, "post_id": 11, "signal": "play", "ts": 900}),  # no view yet: no_view
    (0, 6, _eng(1, 11, "v1", "play", 1100)),  # v1 is of another post: view_mismatch
    (0, 7, _eng(2, 20, None, "like", 5000)),  # tie on ts: v3b (later offset)
    (0, 8, _eng(2, 20, "v7", "like", 20_000)),  # another user's view: no_view
    (0, 9, _eng(3, 30, "v4", "dislike", 9100)),  # unknown_signal
    (0, 10, "xx"),  # malformed from here ...
    (0, 11, _eng(3, 30, "v4", "like", "9100")),
    (0, 12, _eng(3, 30, "", "like", 9100)),
    (0, 13, _eng(3, 30, "v4", 5, 9100)),
    (0, 14, _eng(3, 30, 7, "like", 9100)),  # ... to here
    (0, 15, _eng(3, 30, "v4", "play", 9999)),
    (0, 16, _eng(2, 20, "v3a", "comment", 5999)),  # named: v3a despite the tie
    (0, 17, _eng(1, 11, None, "share", 1000)),  # at view ts: inside
    (0, 18, _eng(6, 60, None, "like", 5)),  # no views at all: no_view
    (0, 19, _eng(7, 70, None, "like", 400)),  # w0 (partition 1) beats w1 (partition 0)
    (0, 20, _eng(1, 12, None, "play", 1600)),  # only the dropped duplicate is of (1, 12)
    (1, 0, _eng(4, 40, None, "share", 700)),  # latest at or before: v6
    (1, 1, _eng(4, 40, None, "like", 550)),  # latest at or before: v5
    (1, 2, _eng(4, 40, "nope", "like", 700)),  # no such view: no_view
    (1, 3, _eng(9, 90, "shared", "like", 15)),  # user 9's duplicate is user 8's view
]


def test_every_rule_on_handcrafted_rows(spark: SparkSession) -> None:
    views = _frame(spark, HAND_VIEWS, binary=True)  # the source yields binary values
    engagements = _frame(spark, HAND_ENGAGEMENTS)
    samples = recompute_samples(views, engagements, WINDOW, SIGNALS)
    assert samples.columns == list(SAMPLE_COLUMNS)
    assert [(f.name, f.dataType) for f in samples.schema][:6] == [
        ("sample_id", StringType()), ("view_id", StringType()), ("user_id", LongType()),
        ("post_id", LongType()), ("ts", LongType()), ("context", StringType()),
    ]
    labels = samples.schema["labels"].dataType
    assert isinstance(labels, StructType)
    assert [(f.name, f.dataType) for f in labels.fields] == [(s, IntegerType()) for s in SIGNALS]
    rows = samples.collect()
    assert next(r.context for r in rows if r.view_id == "v4") == (
        '{"nested":{"k":[1,{"z":null}]},"ü":"ä"}'  # the contract's text, not just its meaning
    )
    assert _sample_tuples(rows) == sorted([
        _expected("v1", 1, 10, 1000, {"lang": "hi", "score": 0.5, "tags": ["a", "b"]},
                  "like", "share"),
        _expected("v2", 1, 11, 1000, {"lang": "en"}, "share"),
        _expected("v3a", 2, 20, 5000, {}, "comment"),
        _expected("v3b", 2, 20, 5000, {"n": 2}, "like"),
        _expected("v4", 3, 30, 9000, {"nested": {"k": [1, {"z": None}]}, "ü": "ä"}, "play"),
        _expected("v5", 4, 40, 100, {}, "like"),
        _expected("v6", 4, 40, 600, {}, "share"),
        _expected("v7", 5, 50, 20_000, {}),
        _expected("w0", 7, 70, 300, {}, "like"),
        _expected("w1", 7, 70, 300, {}),
        _expected("shared", 8, 80, 10, {}),
    ])

    outcomes = engagement_outcomes(views, engagements, WINDOW, SIGNALS).collect()
    assert Counter(r.outcome for r in outcomes) == {
        "attached": 10, "no_view": 5, "outside_window": 2, "view_mismatch": 2,
        "unknown_signal": 1, "malformed": 5,
    }
    orphans = [r for r in outcomes if r.outcome in ("no_view", "outside_window")]
    assert sorted((r.kafka_partition, r.kafka_offset, r.outcome, r.view_id) for r in orphans) == [
        (0, 3, "outside_window", "v1"), (0, 4, "outside_window", "v1"),
        (0, 5, "no_view", None), (0, 8, "no_view", "v7"), (0, 18, "no_view", None),
        (0, 20, "no_view", None),
        (1, 2, "no_view", "nope"),
    ]


# -- random rows against a brute-force reference ---------------------------------------------


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _reference(
    views: list[Raw], engagements: list[Raw], window: int, signals: tuple[str, ...],
    ttl: int | None = None,
) -> tuple[list[tuple[Any, ...]], list[tuple[int, int, str]]]:
    """The contract, literally: every engagement looks at every view; a view_id is
    de-duplicated across users, first (partition, offset) wins, for `ttl` of event time."""
    def parse(value: Any) -> Any:
        try:
            return json.loads(value) if isinstance(value, str) else value
        except ValueError:
            return None

    kept: dict[tuple[str, int], dict[str, Any]] = {}  # (view_id, ts) -> first arrival
    known: dict[tuple[int, str], list[dict[str, Any]]] = {}  # first arrivals a user knows of
    last: dict[str, dict[str, Any]] = {}
    for p, o, value in sorted(views, key=lambda r: (r[0], r[1])):
        v = parse(value)
        if not (isinstance(v, dict) and isinstance(v.get("view_id"), str) and v["view_id"]
                and _is_int(v.get("user_id")) and _is_int(v.get("post_id"))
                and _is_int(v.get("ts")) and v["ts"] >= 0):
            continue
        first = last.get(v["view_id"])
        if first is None or (ttl is not None and v["ts"] >= first["ts"] + ttl):
            first = last[v["view_id"]] = kept[(v["view_id"], v["ts"])] = {**v, "_at": (p, o)}
        known.setdefault((v["user_id"], v["view_id"]), []).append(first)
    hits: dict[tuple[str, int], set[str]] = {key: set() for key in kept}
    orphans = []
    for p, o, value in engagements:
        e = parse(value)
        if not (isinstance(e, dict) and _is_int(e.get("user_id")) and _is_int(e.get("post_id"))
                and isinstance(e.get("signal"), str) and _is_int(e.get("ts"))
                and e["ts"] >= 0 and (e.get("view_id") is None
                                      or (isinstance(e["view_id"], str) and e["view_id"]))):
            continue
        if e["signal"] not in signals:
            continue
        if e.get("view_id") is not None:
            firsts = known.get((e["user_id"], e["view_id"]), [])
            before = [v for v in firsts if v["ts"] <= e["ts"]]
            view = (max(before, key=lambda v: v["ts"]) if before
                    else min(firsts, key=lambda v: v["ts"], default=None))
            if view is not None and (view["user_id"], view["post_id"]) != (
                    e["user_id"], e["post_id"]):
                continue  # view_mismatch
        else:
            before = [v for v in kept.values() if v["user_id"] == e["user_id"]
                      and v["post_id"] == e["post_id"] and v["ts"] <= e["ts"]]
            view = max(before, key=lambda v: (v["ts"], v["_at"]), default=None)
        if view is None:
            orphans.append((p, o, "no_view"))
        elif view["ts"] <= e["ts"] < view["ts"] + window:
            hits[(view["view_id"], view["ts"])].add(e["signal"])
        else:
            orphans.append((p, o, "outside_window"))
    samples = []
    for key, v in kept.items():
        context = {k: x for k, x in v.items() if k not in ("view_id", "user_id", "post_id",
                                                           "ts", "_at")}
        samples.append((v["view_id"], v["view_id"], v["user_id"], v["post_id"], v["ts"],
                        json.dumps(context, sort_keys=True),
                        tuple(int(s in hits[key]) for s in signals)))
    return sorted(samples), sorted(orphans)


def _random_rows(seed: int) -> tuple[list[Raw], list[Raw]]:
    rng = random.Random(seed)
    ids = [f"v{n}" for n in range(30)]
    offsets = {0: 0, 1: 0}

    def at() -> tuple[int, int]:
        p = rng.randrange(2)
        offsets[p] += 1
        return p, offsets[p] - 1

    views: list[Raw] = []
    for _ in range(90):
        value: Any = _view(rng.choice(ids), rng.randint(1, 4), rng.randint(1, 3),
                           rng.randrange(0, 6000, 100), n=rng.randint(0, 9))
        if rng.random() < 0.08:
            value = rng.choice(["{bad", _view(rng.choice(ids), True, 1, 5),
                                _view(rng.choice(ids), 1, 1, -100), _view("", 1, 1, 5)])
        views.append((*at(), value))
    offsets = {0: 0, 1: 0}
    engagements: list[Raw] = []
    for _ in range(300):
        roll = rng.random()
        view_id = None if roll < 0.45 else rng.choice([*ids, "ghost"])
        value = _eng(rng.randint(1, 4), rng.randint(1, 3), view_id,
                     rng.choice([*SIGNALS, "skip"]), rng.randrange(0, 7000, 50))
        if rng.random() < 0.05:
            value = rng.choice(["nope", _eng(1, 1, None, "like", True), _eng(1, 1, "", "like", 5)])
        engagements.append((*at(), value))
    return views, engagements


@pytest.mark.parametrize("ttl", [None, 2_000])
def test_random_rows_agree_with_brute_force(spark: SparkSession, ttl: int | None) -> None:
    """View ids shared by users and re-sent; with a TTL, some again as new views."""
    raw_views, raw_engagements = _random_rows(seed=20240601)
    window = 700
    views, engagements = _frame(spark, raw_views), _frame(spark, raw_engagements)
    expected_samples, expected_orphans = _reference(raw_views, raw_engagements, window, SIGNALS,
                                                    ttl)
    assert sum(any(s[6]) for s in expected_samples) > 10  # the data exercises the labels
    assert len(expected_orphans) > 10
    ids = [s[0] for s in expected_samples]
    assert (len(set(ids)) == len(ids)) == (ttl is None), "with a TTL, some ids come back"
    samples = recompute_samples(views, engagements, window, SIGNALS, ttl).collect()
    assert _sample_tuples(samples) == expected_samples
    orphans = recompute_orphans(views, engagements, window, SIGNALS, ttl).collect()
    assert sorted((r.kafka_partition, r.kafka_offset, r.reason) for r in orphans) == (
        expected_orphans
    )


def test_arguments_are_checked(spark: SparkSession) -> None:
    views = _frame(spark, [])
    with pytest.raises(ValueError, match="repeats"):
        recompute_samples(views, views, WINDOW, ["like", "like"])
    with pytest.raises(ValueError, match="positive"):
        recompute_samples(views, views, 0, SIGNALS)
    with pytest.raises(ValueError, match="missing"):
        recompute_samples(views.drop("kafka_offset"), views, WINDOW, SIGNALS)
