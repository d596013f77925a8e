"""No record stops the join (CONTRACTS section 9): a micro-batch in one step, and when that
step raises, again one record at a time so that only the failing records are left out.

The fast path costs one snapshot of the user's state per batch. On a failure the state goes
back to the snapshot and the records are added one by one in the order `add_records` uses
(views before engagements, each in arrival order), each from a snapshot of its own: a record
that raises leaves the state as it was before it, and the others land exactly as they would
have in one step.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from spark_jobs.samples.core.joiner import JoinParameters, StepResult, UserJoinState, add_records
from spark_jobs.samples.core.records import Engagement, Record


@dataclass(slots=True)
class IsolatedStep:
    """The user's state after the step, what it emitted, and the records that raised."""

    state: UserJoinState
    result: StepResult
    failed: list[tuple[Record, Exception]] = field(default_factory=list)


def _arrival(record: Record) -> tuple[bool, str, int, int]:
    return (isinstance(record, Engagement), *record.source.order)


def add_isolated(
    state: UserJoinState,
    records: Iterable[Record],
    watermark_ms: int,
    params: JoinParameters,
    snapshot: bytes | None = None,
) -> IsolatedStep:
    """`add_records`, where a record whose processing raises is returned in `failed` instead
    of failing the step; `state` must not be used afterwards (use the returned one).
    `snapshot`: the bytes `state` was just decoded from, if any (saves encoding it again)."""
    records = list(records)
    if snapshot is None:
        snapshot = state.to_bytes()
    try:
        return IsolatedStep(state, add_records(state, records, watermark_ms, params))
    except Exception:  # which record: found below, one at a time
        state = UserJoinState.from_bytes(snapshot)
    step = IsolatedStep(state, StepResult())
    for record in sorted(records, key=_arrival):
        snapshot = step.state.to_bytes()
        try:
            step.result.extend(add_records(step.state, [record], watermark_ms, params))
        except Exception as exc:  # one bad record must not stop the others
            step.state = UserJoinState.from_bytes(snapshot)
            step.failed.append((record, exc))
    return step
