"""filter_events' bucketed capping without Spark: the column-wise path gives the same output
rows, drop counts, state and timeout as the same processor taking every user row by row
(`cap_rows`, the per-user path), whatever mix of plain, late, capped, undecodable, timeless
and future records a bucket gets, batch after batch."""

from __future__ import annotations

import pickle
from collections import Counter
from typing import Any

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_jobs.experiments.core.capping import HOUR_MS
from spark_jobs.experiments.processors.cap_processor import INPUT_FIELDS, HourlyCapProcessor
from spark_jobs.streaming.bucketed.processor import BucketedProcessor
from spark_jobs.streaming.bucketed.store import BucketStore
from spark_jobs.streaming.event_time import FUTURE_COLUMN

H = HOUR_MS
COLUMNS = (*INPUT_FIELDS, FUTURE_COLUMN)
INT_DTYPES = {"user_id": "Int64", "ts": "Int64", "kafka_partition": "Int32",
              "kafka_offset": "Int64", "kafka_timestamp": "Int64", FUTURE_COLUMN: "Int64"}


class RowByRow(HourlyCapProcessor):
    """The reference: every key through the base's per-key loop and `cap_rows`."""

    def __call__(self, key, frames, state):
        return BucketedProcessor.__call__(self, key, frames, state)


class GroupStateStub:
    """The part of applyInPandasWithState's GroupState a bucketed processor uses."""

    def __init__(self) -> None:
        self.value, self.timeout, self.watermark, self.hasTimedOut = None, None, 0, False

    @property
    def getOption(self):
        return self.value

    def getCurrentWatermarkMs(self) -> int:
        return self.watermark

    def update(self, value) -> None:
        self.value = value

    def remove(self) -> None:
        self.value, self.timeout = None, None

    def setTimeoutTimestamp(self, ms: int) -> None:
        self.timeout = ms


def frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    full = [{**dict.fromkeys(COLUMNS), **row} for row in rows]
    df = pd.DataFrame(full, columns=list(COLUMNS))
    for name, dtype in INT_DTYPES.items():
        df[name] = pd.array(df[name].tolist(), dtype=dtype)
    return df


def outputs(processor, state, rows, timed_out=False):
    """Rows but drop counts (sorted, as tuples) and the drop counts summed by reason."""
    state.hasTimedOut = timed_out
    frames = iter(()) if timed_out else iter([frame(rows[:3]), frame(rows[3:])])
    out = pd.concat(list(processor((1,), frames, state)), ignore_index=True)
    records = out.astype(object).where(out.notna(), None).to_dict("records")
    dropped = Counter()
    kept = []
    for r in records:
        if r["kind"] == "dropped":
            dropped[r["reason"]] += r["dropped"]
        else:
            kept.append(tuple((k, v) for k, v in r.items()))
    return sorted(kept, key=repr), dropped


def stored(state):
    if state.value is None:
        return None, state.timeout
    store = BucketStore.from_blob(state.value[0], 8)
    return ({u: pickle.loads(p) for u, p in store.payloads.items()}, store.wakeups,
            state.timeout)


@st.composite
def batch(draw, start: int) -> list[dict[str, Any]]:
    out = []
    for offset in range(start, start + draw(st.integers(0, 25))):
        row = dict(user_id=draw(st.sampled_from([1, 2, 3, 2**63 - 1])),
                   event_type=draw(st.sampled_from(["click", "save"])),
                   ts=draw(st.integers(0, 5 * H)), kafka_topic="events",
                   kafka_partition=draw(st.integers(0, 1)), kafka_offset=offset,
                   kafka_timestamp=5 * H, kafka_key=draw(st.sampled_from(["1", None])))
        odd = draw(st.sampled_from(["plain"] * 8 + ["error", "no ts", "future"]))
        if odd == "error":
            row.update(error="not valid JSON", raw_value="{x")
        elif odd == "no ts":
            row.update(ts=None)
        elif odd == "future":
            row[FUTURE_COLUMN] = 10 * H
        out.append(row)
    return out


@settings(max_examples=40, deadline=None)
@given(st.data(), st.integers(1, 4))
def test_the_column_wise_path_gives_what_the_per_user_path_gives(data, cap):
    vector, reference = HourlyCapProcessor(cap), RowByRow(cap)
    vector.buckets = reference.buckets = 8
    ours, theirs = GroupStateStub(), GroupStateStub()
    watermark = 0
    for step in range(4):
        rows = data.draw(batch(step * 100), label=f"batch {step}")
        watermark = data.draw(st.integers(watermark, watermark + 2 * H), label="watermark")
        ours.watermark = theirs.watermark = watermark
        timed_out = not rows and ours.value is not None
        assert outputs(vector, ours, rows, timed_out) == outputs(reference, theirs, rows,
                                                                 timed_out)
        assert stored(ours) == stored(theirs)


def test_accepted_rows_keep_every_coordinate_and_exact_integers():
    processor, state = HourlyCapProcessor(1), GroupStateStub()
    processor.buckets = 8
    big = 2**63 - 1
    rows = [dict(user_id=big, event_type="click", ts=H, kafka_topic="events",
                 kafka_partition=1, kafka_offset=2**62 + 1, kafka_timestamp=2 * H,
                 kafka_key=None),
            dict(user_id=big, event_type="save", ts=H + 1, kafka_topic="events",
                 kafka_partition=1, kafka_offset=2**62 + 2, kafka_timestamp=2 * H,
                 kafka_key="k")]
    kept, dropped = outputs(processor, state, rows)
    assert [dict(r) for r in kept] == [{
        "kind": "ok", "user_id": big, "event_type": "click", "ts": H, "topic": "events",
        "partition": 1, "offset": 2**62 + 1, "kafka_timestamp": 2 * H, "key": None,
        "raw_value": None, "reason": None, "detail": None, "dropped": None}]
    assert dropped == {"capped": 1}
    assert stored(state) == ({big: {1: 1}}, {big: 2 * H}, 2 * H - 1)
