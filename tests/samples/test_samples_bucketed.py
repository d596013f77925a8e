"""The job's two bucketed steps (view de-duplication by view_id bucket, then the join by user
bucket), driven as applyInPandasWithState drives them (Kafka-shaped frames in, frames out, one
blob and one timeout per bucket, a timed-out bucket called without rows), equal the
all-at-once reference of test_samples_dedup_random on the same randomized traffic, and
keep the dead-letter evidence of what they cannot use."""

from __future__ import annotations

import json
import random
import zlib
from collections import defaultdict
from typing import Any

import pandas as pd
from pyspark.sql.streaming.tws_tester import _InMemoryStatefulProcessorHandle
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType
from streaming.test_bucketed import FakeState
from test_samples_dedup_random import (
    END,
    SIGNALS,
    accepted_and_duplicates,
    random_case,
    reference,
    watermark_bounds,
)

from spark_jobs.samples.core.isolation import add_isolated
from spark_jobs.samples.core.joiner import JoinParameters
from spark_jobs.samples.core.records import Engagement, Source, View
from spark_jobs.samples.processors.dedup_processor import VIEW_KEY, ViewDedupProcessor
from spark_jobs.samples.processors.join_processor import SampleJoinProcessor
from spark_jobs.streaming.bucketed.frames import column_values
from spark_jobs.streaming.bucketed.keys import UNKEYED
from spark_jobs.streaming.event_time import FUTURE_COLUMN

BUCKETS = 3  # few buckets: several keys share one
COLUMNS = StructType([  # the job's columns ahead of the de-duplication
    StructField("kafka_key", StringType()), StructField("value", BinaryType()),
    StructField("kafka_topic", StringType()), StructField("kafka_partition", IntegerType()),
    StructField("kafka_offset", LongType()), StructField("kafka_timestamp", LongType()),
    StructField("user_id", LongType()), StructField(FUTURE_COLUMN, LongType()),
])
_INTS = {"kafka_partition": "Int32", "kafka_offset": "Int64", "kafka_timestamp": "Int64",
         "user_id": "Int64", FUTURE_COLUMN: "Int64"}


def message(record: Any) -> dict[str, Any]:
    """A record as the source delivers it, with the columns Spark computes in the JVM."""
    s = record.source
    row = {"kafka_key": None, "kafka_topic": s.topic, "kafka_partition": s.partition,
           "kafka_offset": s.offset, "kafka_timestamp": s.kafka_timestamp, FUTURE_COLUMN: None}
    if isinstance(record, View):
        value = {"view_id": record.view_id, "user_id": record.user_id,
                 "post_id": record.post_id, "ts": record.ts, **json.loads(record.context)}
        return {**row, "value": json.dumps(value).encode(), "user_id": record.user_id,
                VIEW_KEY: record.view_id}
    key = f"\u0000{s.partition}"
    if isinstance(record, Engagement):
        value = {"user_id": record.user_id, "post_id": record.post_id,
                 "view_id": record.view_id, "signal": record.signal, "ts": record.ts}
        return {**row, "value": json.dumps(value).encode(), "user_id": record.user_id,
                VIEW_KEY: key}
    return {**row, "value": b"x", "user_id": None, VIEW_KEY: key}  # not JSON


def typed(rows: list[dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    for name, dtype in _INTS.items():
        frame[name] = pd.array(frame[name].tolist(), dtype=dtype)
    return frame


def bucket(key: Any) -> int:
    return UNKEYED if key is None else zlib.crc32(str(key).encode()) % BUCKETS


class Watermark:
    def __init__(self, ms: int) -> None:
        self.ms = ms

    def getCurrentWatermarkInMs(self) -> int:
        return self.ms


def grouped(frame: pd.DataFrame, key: str) -> dict[int, pd.DataFrame]:
    """The frame's rows by bucket of `key`, in chunks and no particular order, as Spark
    hands them over."""
    if frame.empty:
        return {}
    keys = column_values(frame[key])  # ints, None for NA
    buckets = pd.Series([bucket(k) for k in keys], index=frame.index, dtype=object)
    return {b: rows.sample(frac=1, random_state=len(rows))
            for b, rows in frame.groupby(buckets, sort=False)}


class Dedup:
    """The de-duplication as transformWithStateInPandas runs it, on PySpark's in-memory
    state handle (the one its TwsTester uses: value, list and map states per grouping key,
    event-time timers): each bucket's rows, then the buckets whose timer the watermark
    reached."""

    def __init__(self, processor: ViewDedupProcessor) -> None:
        self.processor = processor
        processor.buckets = BUCKETS
        self.handle = _InMemoryStatefulProcessorHandle("EventTime")
        processor.init(self.handle)

    def batch(self, frame: pd.DataFrame, watermark: int) -> list[pd.DataFrame]:
        out = []
        self.handle.setWatermark(watermark)
        for b, rows in grouped(frame, VIEW_KEY).items():
            self.handle.setGroupingKey((b,))
            out.extend(self.processor.handleInputRows(
                (b,), iter([rows.iloc[:2], rows.iloc[2:]]), Watermark(watermark)))
        timers = self.handle._timers
        for key in list(timers.getAllKeysWithTimers()):
            for due in [t for t in timers.listTimers(key) if t <= watermark]:
                timers.deleteTimer(key, due)
                self.handle.setGroupingKey(key)
                out.extend(self.processor.handleExpiredTimer(key, Watermark(watermark), None))
        return out

    def is_empty(self) -> bool:
        """Nothing remembered and no timer left."""
        h = self.handle
        states = [*h.value_states.values(), *h.list_states.values(), *h.map_states.values()]
        return (not list(h._timers.getAllKeysWithTimers())
                and all(not any(s.state.values()) for s in states))


class Join:
    """The join as applyInPandasWithState runs it: each bucket's rows, then the buckets
    whose timeout the watermark passed, called without rows."""

    def __init__(self, processor: SampleJoinProcessor) -> None:
        self.processor = processor
        processor.buckets = BUCKETS
        self.states: dict[int, FakeState] = defaultdict(FakeState)

    def batch(self, frame: pd.DataFrame, watermark: int) -> list[pd.DataFrame]:
        groups = grouped(frame, "user_id")
        out = []
        for b in {*groups, *self.states}:
            state = self.states[b]
            state.watermark = watermark
            state.hasTimedOut = b not in groups
            if state.hasTimedOut and (state.timeout is None or state.timeout >= watermark):
                continue  # Spark times a group out once the watermark is past its timestamp
            rows = groups.get(b)
            chunks = [] if rows is None else [rows.iloc[:2], rows.iloc[2:]]
            out.extend(self.processor((b,), iter(chunks), state))
        return out


def concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def outputs(frame: pd.DataFrame) -> list[dict[str, Any]]:
    if frame.empty:
        return []
    return frame.astype(object).where(frame.notna(), None).to_dict("records")


def run_case(params: JoinParameters, ttl: int, batches: list, watermarks: list[int]) -> tuple:
    dedup = Dedup(ViewDedupProcessor(COLUMNS, ttl))
    join = Join(SampleJoinProcessor(params))
    samples, orphans, dead, duplicates = [], [], [], 0
    for batch, watermark in [*zip(batches, watermarks, strict=True), ([], END)]:
        frame = typed([message(r) for r in batch]) if batch else pd.DataFrame(
            columns=[*COLUMNS.fieldNames(), VIEW_KEY])
        for row in outputs(concat(join.batch(concat(dedup.batch(frame, watermark)), watermark))):
            source = Source(row["topic"], row["partition"], row["offset"],
                            row["kafka_timestamp"], row["key"])
            if row["kind"] == "sample":
                labels = tuple((s, row["labels"][s]) for s in params.signals)
                samples.append((row["view_id"], row["user_id"], row["post_id"], row["ts"],
                                labels))
            elif row["kind"] == "orphan":
                orphans.append((row["reason"], source))
            elif row["kind"] == "dead":
                assert row["detail"], row  # the evidence says why
                dead.append((row["reason"], source))
            else:
                duplicates += row["dropped"]
    assert dedup.is_empty()
    assert all(s.value is None for s in join.states.values())
    return sorted(samples), sorted(orphans, key=repr), sorted(dead, key=repr), duplicates


def test_bucketed_dedup_then_join_in_random_batches_equals_the_reference():
    rng = random.Random(20261126)
    checked = 0
    for _ in range(120):
        params, ttl, records = random_case(rng)
        firsts = accepted, _ = accepted_and_duplicates(records, ttl)
        cuts = set(rng.sample(range(1, len(records) + 1), min(len(records), rng.randint(0, 6))))
        cuts.update(i for i, r in enumerate(records) if i and r in accepted and any(  # a new
            (v.view_id, v.user_id) == (r.view_id, r.user_id) and v.ts < r.ts for v in accepted))
        cuts = sorted(cuts)  # view of an id the user sent beyond the TTL starts a batch
        batches = [records[a:b] for a, b in zip([0, *cuts], [*cuts, len(records)], strict=True)]
        watermarks, wm = [], 0
        for i, batch in enumerate(batches):
            low, high = watermark_bounds(batch, [r for b in batches[i:] for r in b], records,
                                         firsts, params.window_ms, ttl)
            wm = max(wm, low)
            if wm > high:
                break  # infeasible cut (see test_samples_dedup_random)
            wm = rng.choice([wm, rng.randint(wm, high)])
            watermarks.append(wm)
        else:
            assert run_case(params, ttl, batches, watermarks) == reference(records, params, ttl)
            checked += 1
    assert checked > 40, checked


def test_the_isolation_restores_from_the_bytes_the_state_was_loaded_from():
    params = JoinParameters(10, SIGNALS)
    old = View("v0", 1, 7, 100, "{}", Source("views", 0, 0, 0, None))
    loaded = SampleJoinProcessor(params).load(None)
    loaded.views["v0"] = old
    payload = loaded.to_bytes()
    processor = SampleJoinProcessor(params)
    state = processor.load(payload)
    bad = View(["not", "hashable"], 1, 7, 105, "{}", Source("views", 0, 1, 1, None))
    good = View("v1", 1, 7, 106, "{}", Source("views", 0, 2, 2, None))
    step = add_isolated(state, [bad, good], 100, params, snapshot=payload)
    assert [record for record, _ in step.failed] == [bad]
    assert set(step.state.views) == {"v0", "v1"} and step.state.views["v0"] == old


def test_a_view_the_join_refuses_as_too_large_is_never_a_first_arrival():
    """The de-duplication parses a view within jobs.max_message_bytes, as the join does: a
    view dead-lettered for its size does not make a later valid view of its id a
    duplicate."""
    limit = 400
    params = JoinParameters(10, SIGNALS)
    dedup = Dedup(ViewDedupProcessor(COLUMNS, 1_000, limit))
    join = Join(SampleJoinProcessor(params, limit))
    big = View("v", 1, 7, 100, json.dumps({"pad": "x" * limit}), Source("views", 0, 0, 0, "1"))
    ok = View("v", 1, 7, 200, "{}", Source("views", 0, 1, 0, "1"))
    rows = []
    for batch, watermark in (([big], 0), ([ok], 0), ([], 10_000)):
        frame = typed([message(r) for r in batch]) if batch else pd.DataFrame(
            columns=[*COLUMNS.fieldNames(), VIEW_KEY])
        rows += outputs(concat(join.batch(concat(dedup.batch(frame, watermark)), watermark)))
    assert sorted((r["kind"], r["reason"], r["offset"]) for r in rows) == [
        ("dead", "malformed", 0), ("sample", None, 1)]
    assert dedup.is_empty() and all(s.value is None for s in join.states.values())
