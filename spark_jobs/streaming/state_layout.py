"""Say what to do when a checkpoint holds state of another layout than the job's.

A job whose stateful step changed (another operator, or another state schema, as when this
version moved jobs to bucketed state) cannot read the state an earlier version checkpointed.
Spark refuses it at the first batch with an error naming operators and schemas; the user
needs the way out: which checkpoint, and that deleting it rebuilds the state.
"""

from __future__ import annotations

# Spark's error classes for a checkpoint whose stateful operators or state schemas differ
STATE_LAYOUT_ERRORS = (
    "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA",
    "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE",
    "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE",
    "STATE_STORE_INVALID_VALUE_SCHEMA_EVOLUTION",
    "STATE_STORE_INVALID_CONFIG_AFTER_RESTART",
    "STATE_STORE_STATE_SCHEMA_FILES_THRESHOLD_EXCEEDED",
)


def state_layout_advice(job: str, failure: str, checkpoint: str) -> str | None:
    """The instruction for a failure caused by a checkpoint of another state layout (None:
    the failure is something else)."""
    found = next((code for code in STATE_LAYOUT_ERRORS if code in failure), None)
    if found is None:
        return None
    return (
        f"job {job}: its checkpoint {checkpoint} holds state written by another version of "
        f"the job (another stateful operator or state layout; Spark says {found}). Either run "
        f"the version that wrote it, or stop the job, delete {checkpoint} and start it again: "
        "it rebuilds its state from the input the topics still retain (README, 'Upgrading "
        "from an earlier version')."
    )
