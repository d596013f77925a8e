"""Record schemas of the topics and their strict JSON decoding (no Spark here).

A message is either decoded into a tuple in field order or rejected with a one-line reason
that names what is wrong; rejected messages go to `dead_letters`, they never stop a job.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from spark_jobs.contracts.json_gate import (
    DEFAULT_MAX_MESSAGE_BYTES,
    MalformedJson,
    compact_flat_object,
    load_json,
)
from spark_jobs.contracts.reasons import MALFORMED

LONG = "long"
TIME_MS = "time_ms"  # a long that must be a plausible epoch-millisecond time
STRING = "string"
BOOL = "bool"

# Event times outside [1970, 10000) are rejected: they would overflow Spark's timestamp
# conversion or drag the watermark years ahead (e.g. microseconds sent as milliseconds).
MAX_TIME_MS = 253_402_300_799_999


class RecordError(ValueError):
    """A message that cannot be decoded: `reason` is the dead-letter reason (a code of
    contracts.reasons), str(error) the detail naming what is wrong."""

    def __init__(self, detail: str, reason: str = MALFORMED) -> None:
        super().__init__(detail)
        self.reason = reason


@dataclass(frozen=True)
class RecordSpec:
    """The fields a topic's JSON objects must have, in output order; extra fields are ignored."""

    name: str
    fields: tuple[tuple[str, str], ...]

    @property
    def field_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.fields)

    def decode(self, value: bytes | str | None,
               max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> tuple[Any, ...]:
        """Return the fields in order, or raise RecordError with the reason."""
        return self.pick(decode_object(value, max_bytes))

    def pick(self, obj: dict[str, Any]) -> tuple[Any, ...]:
        """Check and take the spec's fields from an already decoded JSON object."""
        out = []
        for name, kind in self.fields:
            if name not in obj or obj[name] is None:
                raise RecordError(f"missing field {name!r}")
            out.append(_check_type(name, kind, obj[name]))
        return tuple(out)


def decode_object(value: bytes | str | None, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
                  ) -> dict[str, Any]:
    """Decode one message value into a JSON object (through the gate), or raise RecordError."""
    if type(value) is bytes:  # the usual compact, flat message: a third of the parse saved
        flat = compact_flat_object(value, max_bytes)
        if flat is not None:
            return flat
    try:
        obj = load_json(value, max_bytes)
    except MalformedJson as exc:
        raise RecordError(str(exc)) from None
    if not isinstance(obj, dict):
        raise RecordError(f"not a JSON object: got {type(obj).__name__}")
    return obj


def _check_type(name: str, kind: str, value: Any) -> Any:
    if kind == LONG:
        if isinstance(value, bool) or not isinstance(value, int):
            raise RecordError(f"field {name!r} must be an integer, got {json_type(value)}")
        if not -(2**63) <= value < 2**63:
            raise RecordError(f"field {name!r} is out of the 64-bit range")
        return value
    if kind == TIME_MS:
        value = _check_type(name, LONG, value)
        if not 0 <= value <= MAX_TIME_MS:
            raise RecordError(
                f"field {name!r} is not an epoch time in milliseconds (1970 to 9999): {value}"
            )
        return value
    if kind == STRING:
        if not isinstance(value, str):
            raise RecordError(f"field {name!r} must be a string, got {json_type(value)}")
        if not value:
            raise RecordError(f"field {name!r} must not be empty")
        return value
    if kind == BOOL:
        if not isinstance(value, bool):
            raise RecordError(f"field {name!r} must be a boolean, got {json_type(value)}")
        return value
    raise AssertionError(f"unknown field kind {kind}")


def json_type(value: Any) -> str:
    """The JSON type name of a decoded value, for error messages (Decimal counts as number)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float | Decimal):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


EVENT = RecordSpec("events", (("user_id", LONG), ("event_type", STRING), ("ts", TIME_MS)))
ACTIVATION = RecordSpec(
    "experiment_activations",
    (
        ("user_id", LONG), ("experiment_hash", STRING), ("experiment_group", STRING),
        ("ts", TIME_MS),
    ),
)
FILTERED_EVENT = RecordSpec("filtered_events", EVENT.fields)
FILTERED_ACTIVATION = RecordSpec(
    "filtered_experiment_activations",
    (*ACTIVATION.fields, ("group_ramp_time", TIME_MS), ("is_control", BOOL)),
)

SPECS: dict[str, RecordSpec] = {
    spec.name: spec for spec in (EVENT, ACTIVATION, FILTERED_EVENT, FILTERED_ACTIVATION)
}


def spec_for(name: str) -> RecordSpec:
    """The record spec of a topic, with a clear error for an unknown name."""
    try:
        return SPECS[name]
    except KeyError:
        raise ValueError(f"no record spec {name!r} (known: {', '.join(sorted(SPECS))})") from None
