"""What the join emits: samples, orphan engagements, dead letters, per step.

A Sample is the contract's sample as fields; `as_dict` gives the one Python shape every part
of the job uses (`labels` as a dict in config order). Outputs keep the Kafka coordinates of
the record they come from, for the dead-letter columns and for a stable output order.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from spark_jobs.samples.core.records import Engagement, Source, View
from spark_jobs.streaming.lake.dead_letters import LATE, DeadLetter

__all__ = ["LATE", "NO_VIEW", "OUTSIDE_WINDOW", "VIEW_MISMATCH", "DeadLetter", "Orphan", "Sample",
           "StepResult", "make_sample"]

# Dead-letter reasons added by the join (the parser adds `malformed` and `unknown_signal`;
# `late` is every job's).
VIEW_MISMATCH = "view_mismatch"
# Orphan reasons.
NO_VIEW = "no_view"
OUTSIDE_WINDOW = "outside_window"


@dataclass(slots=True, unsafe_hash=True)  # one per view: built as cheaply as a View
class Sample:
    """One view with its labels: ((signal, 0 or 1), ...) in config order; never mutated."""

    view_id: str
    user_id: int
    post_id: int
    ts: int
    context: str
    labels: tuple[tuple[str, int], ...]
    source: Source

    @property
    def sample_id(self) -> str:
        return self.view_id

    def as_dict(self) -> dict[str, Any]:
        return {
            "sample_id": self.view_id,
            "view_id": self.view_id,
            "user_id": self.user_id,
            "post_id": self.post_id,
            "ts": self.ts,
            "context": self.context,
            "labels": dict(self.labels),
        }


def make_sample(view: View, signals: Sequence[str], seen: Collection[str]) -> Sample:
    """The view's sample: label 1 for each configured signal seen at least once."""
    labels = tuple((signal, int(signal in seen)) for signal in signals)
    return Sample(view.view_id, view.user_id, view.post_id, view.ts, view.context, labels,
                  view.source)


@dataclass(frozen=True, slots=True)
class Orphan:
    """An engagement no sample took: reason `no_view` or `outside_window`."""

    engagement: Engagement
    reason: str


@dataclass(slots=True)
class StepResult:
    """Everything one step emitted; duplicate_views counts views dropped as re-deliveries."""

    samples: list[Sample] = field(default_factory=list)
    orphans: list[Orphan] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    duplicate_views: int = 0

    def extend(self, other: StepResult) -> StepResult:
        """Append another step's outputs (e.g. add_records then advance of one batch)."""
        self.samples.extend(other.samples)
        self.orphans.extend(other.orphans)
        self.dead_letters.extend(other.dead_letters)
        self.duplicate_views += other.duplicate_views
        return self
