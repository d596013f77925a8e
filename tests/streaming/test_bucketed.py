"""The bucketed-state base without Spark: a fake GroupState drives it as
applyInPandasWithState does (frames in, frames out, one blob and one timeout per bucket)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pandas as pd
import pytest
from pyspark.sql import Row
from pyspark.sql.types import LongType, StringType, StructField

from spark_jobs.streaming.bucketed.frames import column_values, to_frame
from spark_jobs.streaming.bucketed.keys import UNKEYED
from spark_jobs.streaming.bucketed.local_state import LocalGroupState
from spark_jobs.streaming.bucketed.processor import BucketedProcessor
from spark_jobs.streaming.bucketed.store import BucketStore
from spark_jobs.streaming.event_time import FUTURE_COLUMN
from spark_jobs.streaming.output_rows import output_schema

SCHEMA = output_schema(StructField("user_id", LongType()), StructField("total", LongType()),
                       StructField("note", StringType()))
FIELDS = ("user_id", "amount", "ts", "kafka_topic", "kafka_partition", "kafka_offset",
          "kafka_timestamp", "kafka_key", "error", "raw_value")


class Sum:
    """A key's running total, due at `until` (then emitted and forgotten)."""

    def __init__(self, total: int = 0, until: int | None = None) -> None:
        self.total, self.until = total, until

    def is_empty(self) -> bool:
        return self.until is None

    def to_bytes(self) -> bytes:
        return f"{self.total},{self.until}".encode()

    def next_wakeup(self) -> int | None:
        return self.until


class SumProcessor(BucketedProcessor[Sum]):
    key_field = "user_id"

    def __init__(self) -> None:
        super().__init__(SCHEMA, FIELDS)

    def load(self, payload: bytes | None) -> Sum:
        if payload is None:
            return Sum()
        total, until = payload.decode().split(",")
        return Sum(int(total), int(until))

    def on_rows(self, key: Any, state: Sum, rows: list[Any], watermark_ms: int
                ) -> Iterable[Row]:
        for row in rows:
            state.total += row.amount
            state.until = max(state.until or 0, row.ts + 10)
        return self.on_due(key, state, watermark_ms) if state.until <= watermark_ms else ()

    def on_due(self, key: Any, state: Sum, watermark_ms: int) -> Iterator[Row]:
        yield self.row("ok", user_id=key, total=state.total)
        state.until = None


FakeState = LocalGroupState  # the GroupState the tests drive processors with (samples too)


def frame(*rows: dict[str, Any]) -> pd.DataFrame:
    base = dict.fromkeys(FIELDS)
    base.update(kafka_topic="t", kafka_partition=0, kafka_timestamp=0)
    full = [{**base, FUTURE_COLUMN: None, **r} for r in rows]
    df = pd.DataFrame(full)
    for name in ("user_id", "amount", "ts", "kafka_offset", FUTURE_COLUMN):
        df[name] = pd.array(df[name].tolist(), dtype="Int64")
    return df


def run(processor: SumProcessor, state: FakeState, bucket: int, *frames: pd.DataFrame
        ) -> list[dict[str, Any]]:
    out = pd.concat(list(processor((bucket,), iter(frames), state)))
    return [{k: v for k, v in r.items() if v is not None and v is not pd.NA}
            for r in out.astype(object).where(out.notna(), None).to_dict("records")]


def test_keys_of_a_bucket_keep_their_own_state_and_wake_up_by_the_bucket_timeout():
    processor, state = SumProcessor(), FakeState()
    processor.buckets = 4
    big = 2**62 + 1  # an int64 no float holds: it must come back exactly
    out = run(processor, state, 1, frame(dict(user_id=big, amount=2, ts=100, kafka_offset=0),
                                         dict(user_id=5, amount=3, ts=120, kafka_offset=1)),
              frame(dict(user_id=big, amount=4, ts=105, kafka_offset=2)))
    assert out == []
    assert state.timeout == 114  # just before the earliest wake-up (115)
    state.watermark, state.hasTimedOut = 116, True
    out = run(processor, state, 1)
    assert out == [{"kind": "ok", "user_id": big, "total": 6}]
    assert state.timeout == 129
    state.watermark, state.hasTimedOut = 200, False
    out = run(processor, state, 1, frame(dict(user_id=7, amount=1, ts=150, kafka_offset=3)))
    assert sorted((r["user_id"], r["total"]) for r in out) == [(5, 3), (7, 1)]
    assert state.value is None and state.timeout is None  # nothing left: the bucket is gone


def test_unkeyed_and_future_rows_are_dead_letters_that_touch_no_state():
    processor, state = SumProcessor(), FakeState()
    processor.buckets = 4
    bad = frame(dict(user_id=None, kafka_offset=7, error="not JSON", raw_value="{x"))
    out = run(processor, state, UNKEYED, bad)
    assert [(r["kind"], r["reason"], r["offset"], r["detail"]) for r in out] == [
        ("dead", "malformed", 7, "not JSON")]
    assert state.value is None
    ahead = frame(dict(user_id=5, amount=1, ts=10**12, kafka_offset=8,
                       **{FUTURE_COLUMN: 10**12}))
    out = run(processor, state, 2, ahead)
    assert [(r["kind"], r["reason"]) for r in out] == [("dead", "future")]
    assert state.value is None


def test_a_checkpoint_of_another_bucket_count_is_refused_with_what_to_do():
    blob = BucketStore(64, {5: b"x"}, {5: 10}).to_blob()
    with pytest.raises(RuntimeError, match=r"jobs\.state_buckets is 32: set it back to 64"):
        BucketStore.from_blob(blob, 32)
    assert BucketStore.from_blob(blob, 64).payloads == {5: b"x"}


def test_frames_keep_nulls_and_exact_integers_both_ways():
    series = pd.Series(pd.array([2**63 - 1, None, -(2**63)], dtype="Int64"))
    assert column_values(series) == [2**63 - 1, None, -(2**63)]
    assert column_values(pd.Series(["a", None, float("nan"), pd.NA], dtype=object)) == [
        "a", None, None, None]
    rows = [Row(**{**dict.fromkeys(SCHEMA.fieldNames()), "kind": "ok", "user_id": 2**63 - 1})]
    out = to_frame(rows, SCHEMA)
    assert list(out.columns) == SCHEMA.fieldNames()
    assert out["user_id"].dtype == "Int64" and out["user_id"][0] == 2**63 - 1
    assert to_frame([], SCHEMA).empty


def test_a_bucket_is_kept_as_ascii_text_and_read_back_whole():
    """Spark keeps the blob in a text column (streaming/state_text.py): any bytes survive."""
    payloads = {5: bytes(range(256)), "u": b"", 2**63 - 1: b"\x00\xff" * 1000}
    blob = BucketStore(64, payloads, {5: 10}).to_blob()
    assert isinstance(blob, str) and blob.isascii()
    store = BucketStore.from_blob(blob, 64)
    assert store.payloads == payloads and store.wakeups == {5: 10}


@pytest.mark.parametrize(("blob", "says"), [
    (BucketStore(64, {5: b"x"}, {}).to_blob().encode(), "a bytes blob"),  # a binary column
    ("not base64!", "base64"), ("AAAA", "")])
def test_a_blob_of_the_binary_format_or_garbage_says_what_to_do(blob, says):
    with pytest.raises(RuntimeError, match=rf"{says}.*delete the job's checkpoint"):
        BucketStore.from_blob(blob, 64)
