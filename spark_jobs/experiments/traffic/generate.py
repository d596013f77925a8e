"""Pure generation: the ordered messages of a spec, chunk by chunk, and their tally.

Production order is event order with bounded jitter: a later record is never more than
disorder_ms behind any earlier one, so with disorder_ms < lateness_ms nothing is late.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from spark_jobs.experiments.traffic.messages import Encoder, GeneratedRecord
from spark_jobs.experiments.traffic.population import Population
from spark_jobs.experiments.traffic.schedule import ChunkMaker, Columns
from spark_jobs.experiments.traffic.spec import KINDS, TOPICS, TrafficSpec


class TrafficGenerator:
    """Pure generation: the ordered messages of a spec, chunk by chunk (cached population)."""

    def __init__(self, spec: TrafficSpec) -> None:
        self.spec = spec

    @cached_property
    def population(self) -> Population:
        return Population(self.spec)

    def chunks(self, cycles: int | None = 1,
               from_ms: int | None = None) -> Iterator[list[GeneratedRecord]]:
        """Lists of records in production order; cycles=None never ends (loop mode).

        from_ms leaves out the records made for event time before it (live traffic that
        starts where something happens), keeping the rest exactly as without it.
        """
        spec = self.spec
        maker = ChunkMaker(spec, self.population)
        encoder = Encoder(spec, self.population)
        cycle = 0
        while cycles is None or cycle < cycles:
            base = spec.start_ms + cycle * spec.duration_ms
            for index, start in enumerate(range(0, spec.duration_ms, spec.chunk_ms)):
                end = min(start + spec.chunk_ms, spec.duration_ms)
                if from_ms is not None and base + end <= from_ms:
                    continue
                cols = maker.make(cycle, index, base + start, base + end)
                ordered = cols.take(self._order(cycle, index, cols))
                if from_ms is not None and base + start < from_ms:
                    ordered = ordered.take(np.flatnonzero(ordered.ts >= from_ms))
                yield encoder.records(ordered)
            cycle += 1

    def _order(self, cycle: int, index: int, cols: Columns) -> np.ndarray:
        """Production order: by ts + jitter in [0, disorder]; a later record is then never
        more than disorder_ms behind any earlier one, and chunks never overlap in ts."""
        rng = np.random.default_rng([self.spec.seed, 1 + cycle, index, 0x0D])
        jitter = rng.integers(0, self.spec.disorder_ms + 1, len(cols.ts))
        return np.argsort(cols.ts + jitter, kind="stable")

    def __iter__(self) -> Iterator[GeneratedRecord]:
        for chunk in self.chunks():
            yield from chunk


def generate(spec: TrafficSpec, cycles: int | None = 1,
             from_ms: int | None = None) -> Iterator[GeneratedRecord]:
    """All records of `spec` in production order (cycles=None: endless, for loop mode),
    from event time from_ms on when given."""
    for chunk in TrafficGenerator(spec).chunks(cycles, from_ms):
        yield from chunk


# ---------------------------------------------------------------- reporting


@dataclass
class GenerationReport:
    """How many messages were made, per topic and per kind (good, duplicate, malformed, spam)."""

    counts: dict[str, dict[str, int]] = field(
        default_factory=lambda: {topic: dict.fromkeys(KINDS, 0) for topic in TOPICS}
    )
    elapsed_s: float = 0.0

    def add(self, topic: str, kind: str, n: int = 1) -> None:
        by_kind = self.counts.setdefault(topic, dict.fromkeys(KINDS, 0))
        by_kind[kind] = by_kind.get(kind, 0) + n

    def total(self, topic: str | None = None, kind: str | None = None) -> int:
        topics = [topic] if topic else list(self.counts)
        return sum(
            n
            for t in topics
            for k, n in self.counts.get(t, {}).items()
            if kind is None or k == kind
        )

    @property
    def rate(self) -> float:
        """Messages per second over elapsed_s."""
        return self.total() / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def summary(self) -> str:
        parts = [
            f"{topic}: " + ", ".join(f"{k}={n}" for k, n in kinds.items())
            for topic, kinds in self.counts.items()
        ]
        return f"{self.total()} messages in {self.elapsed_s:.1f}s ({'; '.join(parts)})"


def tally(records: Iterator[GeneratedRecord] | Sequence[GeneratedRecord]) -> GenerationReport:
    """A report of already generated records (no I/O)."""
    report = GenerationReport()
    started = time.perf_counter()
    for record in records:
        report.add(record.topic, record.kind)
    report.elapsed_s = time.perf_counter() - started
    return report
