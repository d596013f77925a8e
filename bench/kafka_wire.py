"""Record batches as the broker stores them, read with raw Fetch requests.

librdkafka hands out messages, not batches: offsets are consecutive across batch boundaries,
so a client cannot tell where one producer batch ends. A Fetch response, though, carries the
stored batches themselves (the v2 record-batch format: base offset, length, last offset
delta, record count), so reading it directly counts them exactly. Tansu returns whole batches
from their base offset; fetching from the offset after the last batch seen reads only new
ones, so a counter is incremental and cheap.

Only what the benchmarks need: Fetch v4 against a single broker that leads every partition
(the embedded broker), no compression decoding (headers are never compressed).
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field

FETCH_KEY, FETCH_VERSION = 1, 4
PARTITION_MAX_BYTES = 16 << 20
COUNT_WAIT_MS = 500


@dataclass(frozen=True)
class Batch:
    """One stored record batch: [base_offset, base_offset + records)."""

    base_offset: int
    last_offset: int
    size: int

    @property
    def records(self) -> int:
        return self.last_offset - self.base_offset + 1


@dataclass
class PartitionFetch:
    """A Fetch answer for one partition: its batches (complete ones only) and high watermark."""

    error: int
    high_watermark: int
    batches: list[Batch] = field(default_factory=list)


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def parse_batches(records: bytes) -> list[Batch]:
    """The complete v2 batches in a records blob (a truncated trailing one is left out)."""
    batches, pos = [], 0
    while pos + 61 <= len(records):  # 61 bytes: the fixed batch header
        base, length = struct.unpack_from(">qi", records, pos)
        end = pos + 12 + length
        if end > len(records):
            break
        magic = records[pos + 16]
        if magic != 2:
            raise ValueError(f"record batch magic {magic} at offset {base}: only v2 is read")
        (delta,) = struct.unpack_from(">i", records, pos + 23)
        batches.append(Batch(base, base + delta, 12 + length))
        pos = end
    return batches


class WireClient:
    """One TCP connection to a broker, for Fetch requests of any topic/partition."""

    def __init__(self, bootstrap: str, timeout_s: float = 30.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self._sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self._correlation = 0

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, api_key: int, version: int, body: bytes) -> bytes:
        self._correlation += 1
        header = struct.pack(">hhi", api_key, version, self._correlation) + _string("bench")
        payload = header + body
        self._sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", self._recv(4))
        answer = self._recv(size)
        (correlation,) = struct.unpack_from(">i", answer)
        if correlation != self._correlation:
            raise RuntimeError(f"answer {correlation} to request {self._correlation}")
        return answer[4:]

    def _recv(self, size: int) -> bytes:
        chunks, left = [], size
        while left:
            chunk = self._sock.recv(min(left, 1 << 20))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def fetch(
        self, topic: str, offsets: dict[int, int], max_wait_ms: int = 100
    ) -> dict[int, PartitionFetch]:
        """Batches of `topic` from each partition's given offset (up to 16 MB each).

        Tansu answers a max wait of 0 with no partitions at all; min bytes 0 still makes it
        answer at once."""
        parts = b"".join(struct.pack(">iqi", p, o, PARTITION_MAX_BYTES) for p, o in offsets.items())
        body = (struct.pack(">iiiib", -1, max_wait_ms, 0, 64 << 20, 0)
                + struct.pack(">i", 1) + _string(topic)
                + struct.pack(">i", len(offsets)) + parts)
        return _parse_fetch(self._request(FETCH_KEY, FETCH_VERSION, body))


def _parse_fetch(answer: bytes) -> dict[int, PartitionFetch]:
    pos = 4  # throttle_time_ms
    found: dict[int, PartitionFetch] = {}
    (topics,) = struct.unpack_from(">i", answer, pos)
    pos += 4
    for _ in range(topics):
        (name_len,) = struct.unpack_from(">h", answer, pos)
        pos += 2 + name_len
        (partitions,) = struct.unpack_from(">i", answer, pos)
        pos += 4
        for _ in range(partitions):
            partition, error, high, _stable = struct.unpack_from(">ihqq", answer, pos)
            pos += 22
            (aborted,) = struct.unpack_from(">i", answer, pos)
            pos += 4 + max(aborted, 0) * 16
            (size,) = struct.unpack_from(">i", answer, pos)
            pos += 4
            records = answer[pos:pos + max(size, 0)]
            pos += max(size, 0)
            found[partition] = PartitionFetch(error, high, parse_batches(records))
    return found


class BatchCounter:
    """Counts the stored batches of partitions incrementally (each fetch reads new ones only).

    Tansu answers with no batches when finding the offset takes longer than the fetch's max
    wait, which grows with the batches a partition holds (`bench.tansu_batches`), so the
    counter waits up to COUNT_WAIT_MS (a fetch of a partition with nothing new waits that long).
    """

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.next_offset: dict[tuple[str, int], int] = {}
        self.batches: dict[tuple[str, int], int] = {}
        self.records: dict[tuple[str, int], int] = {}

    def update(self, partitions: dict[str, list[int]]) -> dict[tuple[str, int], int]:
        """Read every new batch of these partitions; returns the batch count of each."""
        with WireClient(self.bootstrap) as client:
            for topic, ids in partitions.items():
                todo = set(ids)
                while todo:
                    offsets = {p: self.next_offset.get((topic, p), 0) for p in sorted(todo)}
                    answer = client.fetch(topic, offsets, max_wait_ms=COUNT_WAIT_MS)
                    todo = {p for p in offsets if self._take(topic, p, answer.get(p))}
        return dict(self.batches)

    def _take(self, topic: str, partition: int, fetched: PartitionFetch | None) -> bool:
        """Add the fetched batches; True when there may be more to read."""
        key = (topic, partition)
        self.batches.setdefault(key, 0)
        self.records.setdefault(key, 0)
        if fetched is None or fetched.error or not fetched.batches:
            return False
        start = self.next_offset.get(key, 0)
        for batch in fetched.batches:
            if batch.last_offset < start:
                continue  # a batch already counted (returned again from its base offset)
            self.batches[key] += 1
            self.records[key] += batch.records
            start = batch.last_offset + 1
        self.next_offset[key] = start
        return start < fetched.high_watermark
