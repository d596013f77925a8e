"""What experiment traffic looks like: `TrafficSpec`, the record kinds and the time units.

Everything that determines the generated traffic is in the spec; equal specs give equal
bytes. The spec refuses what would break the guarantees, above all a disorder that would
make a record late.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_jobs.contracts.topics import TOPIC_ACTIVATIONS, TOPIC_EVENTS
from spark_jobs.experiments.traffic.ramps import CASES, ramp_rows, write_ramps_csv
from spark_jobs.settings import ExperimentSettings
from spark_jobs.streaming.traffic import DEFAULT_START_MS

MINUTE_MS = 60_000
HOUR_MS = 3_600_000
DEFAULT_CRITICAL = ("impression", "click", "save", "search")
DEFAULT_OTHER = ("scroll", "hover")
USER_ID_BASE = 1_000_000

GOOD = "good"
DUPLICATE = "duplicate"
MALFORMED = "malformed"
SPAM = "spam"
KINDS = (GOOD, DUPLICATE, MALFORMED, SPAM)
TOPICS = (TOPIC_EVENTS, TOPIC_ACTIVATIONS)

MALFORMED_KINDS = (
    "not_json",
    "json_array",
    "missing_field",
    "ts_string",
    "user_id_float",
    "null_value",
)


@dataclass(frozen=True)
class TrafficSpec:
    """Everything that determines the generated traffic; equal specs give equal bytes.

    Rates: `events_per_user_hour` is the mean over all event types of an average user;
    `activations_per_user` is the mean number of triggers per experiment a user is in,
    over `duration_ms`. `effect` multiplies the treatment rate of `effect_event_type`.
    `disorder_ms` (default lateness_ms // 2) bounds out-of-order production and must be
    below `lateness_ms`; `spam_events_per_hour` defaults to twice the cap.
    """

    seed: int = 7
    start_ms: int = DEFAULT_START_MS
    duration_ms: int = 2 * HOUR_MS
    n_users: int = 2_000
    n_experiments: int = 4
    events_per_user_hour: float = 60.0
    activations_per_user: float = 6.0
    effect: float = 0.2
    effect_event_type: str = "click"
    membership_rate: float = 0.4
    duplicate_rate: float = 0.02
    disorder_ms: int | None = None
    n_spammers: int = 3
    spam_events_per_hour: int | None = None
    malformed_rate: float = 0.002
    equal_ts_rate: float = 0.02
    n_unramped_experiments: int = 1
    period_ms: int = 40 * MINUTE_MS
    window_ms: int = 5 * MINUTE_MS
    lateness_ms: int = MINUTE_MS
    cap_per_user_hour: int = 300
    critical_event_types: tuple[str, ...] = DEFAULT_CRITICAL
    other_event_types: tuple[str, ...] = DEFAULT_OTHER
    chunk_ms: int = 5 * MINUTE_MS

    def __post_init__(self) -> None:
        if self.disorder_ms is None:
            object.__setattr__(self, "disorder_ms", self.lateness_ms // 2)
        if self.spam_events_per_hour is None:
            object.__setattr__(self, "spam_events_per_hour", 2 * self.cap_per_user_hour)
        object.__setattr__(self, "critical_event_types", tuple(self.critical_event_types))
        object.__setattr__(self, "other_event_types", tuple(self.other_event_types))
        _validate(self)

    @classmethod
    def from_settings(cls, experiments: ExperimentSettings, **overrides: Any) -> TrafficSpec:
        """A spec whose period, window, lateness, cap and types match the pipeline's config."""
        base: dict[str, Any] = {
            "period_ms": experiments.period_ms,
            "window_ms": experiments.window_ms,
            "lateness_ms": experiments.lateness_ms,
            "cap_per_user_hour": experiments.cap_per_user_hour,
            "critical_event_types": tuple(experiments.critical_event_types),
        }
        base.update(overrides)
        return cls(**base)

    def experiment_settings(self, dedup_ttl_ms: int = 5 * MINUTE_MS) -> ExperimentSettings:
        """The pipeline settings this traffic was made for (tests and the demo use them)."""
        return ExperimentSettings(
            period_ms=self.period_ms,
            window_ms=self.window_ms,
            lateness_ms=self.lateness_ms,
            dedup_ttl_ms=dedup_ttl_ms,
            cap_per_user_hour=self.cap_per_user_hour,
            critical_event_types=self.critical_event_types,
        )

    @property
    def event_types(self) -> tuple[str, ...]:
        """Critical types first, then the non-critical ones the event filter must drop."""
        extra = [t for t in self.other_event_types if t not in self.critical_event_types]
        return (*self.critical_event_types, *extra)

    @property
    def experiments(self) -> tuple[str, ...]:
        """Ramped experiment hashes; experiment i follows validation case CASES[i % 4]."""
        return tuple(f"exp{i + 1}_{CASES[i % len(CASES)]}" for i in range(self.n_experiments))

    @property
    def unramped_experiments(self) -> tuple[str, ...]:
        """Experiments with activations but no ramp rows: the activation filter drops them."""
        return tuple(f"exp_unramped{i + 1}" for i in range(self.n_unramped_experiments))

    def user_id(self, index: int) -> int:
        """User id of user `index` (spammers follow the n_users ordinary users)."""
        return USER_ID_BASE + index

    @property
    def spammer_ids(self) -> tuple[int, ...]:
        return tuple(self.user_id(self.n_users + i) for i in range(self.n_spammers))

    def ramp_rows(self, cycles: int = 1) -> list[dict[str, Any]]:
        return ramp_rows(self, cycles)

    def write_ramps_csv(self, path: str | Path, cycles: int = 1) -> Path:
        return write_ramps_csv(self, path, cycles)


def _validate(spec: TrafficSpec) -> None:
    """Reject specs that would break the guarantees (above all: nothing may be late)."""
    checks = [
        (spec.seed >= 0, "seed must be >= 0"),
        (spec.duration_ms > 0, "duration_ms must be positive"),
        (spec.n_users > 0, "n_users must be positive"),
        (spec.n_experiments >= 0, "n_experiments must be >= 0"),
        (spec.chunk_ms > 0, "chunk_ms must be positive"),
        (0 < spec.window_ms <= spec.period_ms, "need 0 < window_ms <= period_ms"),
        (spec.cap_per_user_hour > 0, "cap_per_user_hour must be positive"),
        (0 <= spec.disorder_ms < max(spec.lateness_ms, 1), "need 0 <= disorder_ms < lateness_ms"),
        (spec.effect > -1, "effect must be > -1"),
        (spec.effect_event_type in spec.critical_event_types, "effect_event_type not critical"),
        (len(spec.critical_event_types) > 0, "need at least one critical event type"),
    ]
    for rate_name in ("membership_rate", "duplicate_rate", "malformed_rate", "equal_ts_rate"):
        value = getattr(spec, rate_name)
        checks.append((0 <= value <= 1, f"{rate_name} must lie in [0, 1]"))
    for ok, message in checks:
        if not ok:
            raise ValueError(f"TrafficSpec: {message}")
