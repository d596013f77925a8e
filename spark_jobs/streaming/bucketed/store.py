"""One bucket's state: each key's state bytes and its next wake-up, kept as one blob.

A bucket holds hundreds to thousands of keys; only the keys a batch touches (and those
whose wake-up has come) are decoded into domain objects, the others stay bytes. The blob is
one pickle of two dicts, read and written once per bucket and micro-batch, kept by Spark as
ASCII text (streaming/state_text.py: a binary state column costs the JVM far more to hand to
Python).
"""

from __future__ import annotations

import pickle
from collections.abc import Hashable, Iterator

from spark_jobs.streaming.state_text import TEXT_BLOB_SCHEMA, from_state_text, to_state_text

STATE_SCHEMA = TEXT_BLOB_SCHEMA
FORMAT = 2  # bumped when the blob's layout changes (a checkpoint of another format is refused)


class BucketStore:
    """Key -> (payload, wake-up) for one bucket."""

    __slots__ = ("buckets", "payloads", "wakeups")

    def __init__(self, buckets: int, payloads: dict[Hashable, bytes] | None = None,
                 wakeups: dict[Hashable, int] | None = None) -> None:
        self.buckets = buckets
        self.payloads: dict[Hashable, bytes] = payloads or {}
        self.wakeups: dict[Hashable, int] = wakeups or {}

    @classmethod
    def from_blob(cls, blob: str | None, buckets: int) -> BucketStore:
        """The stored bucket; refused when written by another format or bucket count (its
        keys would now belong to other buckets and their state would be lost)."""
        if not blob:
            return cls(buckets)
        try:
            if not isinstance(blob, str):  # a binary blob of format 1
                raise TypeError(f"a {type(blob).__name__} blob")
            version, stored_buckets, payloads, wakeups = pickle.loads(from_state_text(blob))
        except Exception as exc:  # what cannot be read, read no further: say what to do
            raise RuntimeError(
                f"bucket state this version cannot read ({exc}): delete the job's checkpoint "
                "(<lake.checkpoints>/<job>) to rebuild its state") from exc
        if version != FORMAT:
            raise RuntimeError(
                f"bucket state of format {version}, this version reads {FORMAT}: delete the "
                "job's checkpoint (<lake.checkpoints>/<job>) to rebuild its state")
        if stored_buckets != buckets:
            raise RuntimeError(
                f"the job's checkpoint keeps its state in {stored_buckets} buckets, "
                f"jobs.state_buckets is {buckets}: set it back to {stored_buckets}, or delete "
                "the job's checkpoint (<lake.checkpoints>/<job>) to rebuild its state")
        return cls(buckets, payloads, wakeups)

    def to_blob(self) -> str:
        return to_state_text(pickle.dumps((FORMAT, self.buckets, self.payloads, self.wakeups),
                                          protocol=pickle.HIGHEST_PROTOCOL))

    def get(self, key: Hashable) -> bytes | None:
        return self.payloads.get(key)

    def put(self, key: Hashable, payload: bytes | None, wakeup: int | None) -> None:
        """Keep `payload` for `key` (None: forget the key) with its next wake-up."""
        if payload is None:
            self.payloads.pop(key, None)
        else:
            self.payloads[key] = payload
        if wakeup is None:
            self.wakeups.pop(key, None)
        else:
            self.wakeups[key] = wakeup

    def due(self, watermark_ms: int) -> Iterator[Hashable]:
        """The keys whose wake-up is at or behind the watermark (as a transformWithState
        timer would fire)."""
        return (key for key, at in list(self.wakeups.items()) if at <= watermark_ms)

    def next_wakeup(self) -> int | None:
        return min(self.wakeups.values()) if self.wakeups else None

    def is_empty(self) -> bool:
        return not self.payloads and not self.wakeups

    def __len__(self) -> int:
        return len(self.payloads)
