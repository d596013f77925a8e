"""Synthetic experiment traffic for Tideline, deterministic by seed.

The pure part (`TrafficSpec`, `ramp_rows`, `generate`) turns a spec into the exact byte
sequence of Kafka messages in production order, so a test, a benchmark and a batch
recomputation can all replay the same traffic. The I/O part (`produce`, `run_for`) sends
that sequence to Kafka with an idempotent producer at a paced rate.

Traffic is built to exercise every rule of CONTRACTS.md sections 2-4: ramp-ups inside and
after a period, activations outside periods, events before a user's first trigger,
duplicates, spammers over the hourly cap, malformed messages, equal timestamps and
bounded out-of-order production (never late when disorder_ms < lateness_ms).
"""

from __future__ import annotations

import csv
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import orjson

from spark_jobs.contracts.tables import RAMPS_HEADER
from spark_jobs.contracts.topics import TOPIC_ACTIVATIONS, TOPIC_EVENTS
from spark_jobs.settings import ExperimentSettings, Settings

MINUTE_MS = 60_000
HOUR_MS = 3_600_000
DEFAULT_START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z, a whole day
DEFAULT_CRITICAL = ("impression", "click", "save", "search")
DEFAULT_OTHER = ("scroll", "hover")
USER_ID_BASE = 1_000_000

CONTROL = "control"
TREATMENT = "treatment"
GROUPS = (CONTROL, TREATMENT)

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

# Share of a user's events per type; types not listed get _OTHER_SHARE before normalising.
_TYPE_MIX = {
    "impression": 0.45,
    "click": 0.08,
    "save": 0.04,
    "search": 0.06,
    "scroll": 0.22,
    "hover": 0.15,
}
_OTHER_SHARE = 0.05
_ACTIVATION_TIE_RATE = 0.1  # events stamped exactly at an activation's ts
_BOUNDARY_RATE = 0.003  # events snapped onto a window boundary
_PLATFORMS = (b"web", b"ios", b"android")

# Ramp schedules per validation case: group -> ((fraction of period after start, pct), ...)
# in load order. "single": one ramp-up (and a ramp-down); "multi": several ramp-ups inside
# the first period, a first row of 0 % and an equal row; "reramp": a ramp-up after the
# first period ended; "edge": a re-ramp exactly at the period end via two rows with equal
# ramp_ts (only load order makes it a ramp-up), treatment ramped later than control.
_SINGLE = ((0.10, 10), (1.60, 5))
_MULTI = ((0.0, 0), (0.20, 5), (0.45, 20), (0.70, 50), (0.85, 50))
_RERAMP = ((0.25, 10), (1.30, 5), (1.50, 30))
CASE_SCHEDULES: dict[str, dict[str, tuple[tuple[float, float], ...]]] = {
    "single": {CONTROL: _SINGLE, TREATMENT: _SINGLE},
    "multi": {CONTROL: _MULTI, TREATMENT: _MULTI},
    "reramp": {CONTROL: _RERAMP, TREATMENT: _RERAMP},
    "edge": {
        CONTROL: ((0.30, 10), (1.30, 5), (1.30, 8), (1.60, 40)),
        TREATMENT: ((0.35, 10), (1.35, 5), (1.35, 8), (1.65, 40)),
    },
}
CASES = tuple(CASE_SCHEDULES)


class GeneratedRecord(NamedTuple):
    """One Kafka message: value None is a null message; ts is the event time it was made for."""

    topic: str
    key: str | None
    value: bytes | None
    ts: int | None
    kind: str = GOOD


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


# ---------------------------------------------------------------- ramps


def ramp_rows(spec: TrafficSpec, cycles: int = 1) -> list[dict[str, Any]]:
    """Rows of the `ramps` table (RAMPS_HEADER keys, ramp_ts in ms) in load order.

    Cycle k repeats the schedule shifted by k * duration_ms (loop mode), preceded by a
    0 % row per group so its first row is a ramp-up again.
    """
    rows: list[dict[str, Any]] = []
    for cycle in range(cycles):
        base = spec.start_ms + cycle * spec.duration_ms
        for index, name in enumerate(spec.experiments):
            schedule = CASE_SCHEDULES[CASES[index % len(CASES)]]
            for group in GROUPS:
                steps = schedule[group]
                if cycle > 0 and steps[0][1] > 0:
                    steps = ((0.0, 0), *steps)
                for fraction, pct in steps:
                    ts = base + round(fraction * spec.period_ms)
                    rows.append(_ramp_row(name, group, ts, pct))
    return rows


def _ramp_row(name: str, group: str, ts: int, pct: float) -> dict[str, Any]:
    values = (name, group, ts, pct, group == CONTROL)
    return dict(zip(RAMPS_HEADER, values, strict=True))


def write_ramps_csv(spec: TrafficSpec, path: str | Path, cycles: int = 1) -> Path:
    """Write the ramp rows as CSV (header RAMPS_HEADER, booleans as true/false)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(RAMPS_HEADER)
        for row in ramp_rows(spec, cycles):
            values = [row[name] for name in RAMPS_HEADER]
            values[-1] = "true" if values[-1] else "false"
            writer.writerow(values)
    return target


# ---------------------------------------------------------------- population

_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _unit_hash(seed: int, salt: int, values: np.ndarray) -> np.ndarray:
    """Stable hash of (seed, salt, value) to [0, 1): splitmix64, independent of any RNG."""
    mixed = (seed * 0x100000001B3 + salt * 0x9E3779B1 + 0x632BE59BD9B4E019) & 0xFFFFFFFFFFFFFFFF
    x = values.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(mixed)
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return (x >> np.uint64(11)).astype(np.float64) / float(2**53)


class _Population:
    """Per-user facts fixed for a spec: ids, activity, memberships, groups, event rates."""

    def __init__(self, spec: TrafficSpec) -> None:
        self.spec = spec
        n_all = spec.n_users + spec.n_spammers
        self.user_ids = np.arange(USER_ID_BASE, USER_ID_BASE + n_all, dtype=np.int64)
        rng = np.random.default_rng([spec.seed, 0xB0B])
        activity = rng.gamma(2.0, 0.5, n_all)
        self.platform = rng.integers(0, len(_PLATFORMS), n_all)
        self.experiments = (*spec.experiments, *spec.unramped_experiments)
        n_exp = len(self.experiments)
        member = np.zeros((n_all, n_exp), dtype=bool)
        treated = np.zeros((n_all, n_exp), dtype=bool)
        for j in range(n_exp):
            member[:, j] = _unit_hash(spec.seed, 2 * j, self.user_ids) < spec.membership_rate
            treated[:, j] = _unit_hash(spec.seed, 2 * j + 1, self.user_ids) < 0.5
        member[spec.n_users :, : spec.n_experiments] = True  # spammers are in every experiment
        self.member = member
        self.treated = treated
        n_treat = (member & treated)[:, : spec.n_experiments].sum(axis=1)
        self.rates = self._rates(activity, n_treat)
        users, exps = np.nonzero(member)
        self.member_user = users.astype(np.int64)
        self.member_code = (2 * exps + treated[users, exps]).astype(np.int64)

    def _rates(self, activity: np.ndarray, n_treat: np.ndarray) -> np.ndarray:
        """Events per hour, user x type; the effect compounds over treatment memberships."""
        spec = self.spec
        shares = np.array([_TYPE_MIX.get(t, _OTHER_SHARE) for t in spec.event_types])
        rates = np.outer(activity, shares / shares.sum()) * spec.events_per_user_hour
        effect_col = spec.event_types.index(spec.effect_event_type)
        rates[:, effect_col] *= (1.0 + spec.effect) ** n_treat
        return rates

    def group_of(self, code: int) -> tuple[str, str]:
        """(experiment_hash, experiment_group) of a membership code 2 * exp + treated."""
        return self.experiments[code // 2], GROUPS[code % 2]


# ---------------------------------------------------------------- chunk columns

_T_EVENT, _T_ACT = 0, 1
_K_GOOD, _K_DUP, _K_BAD, _K_SPAM = 0, 1, 2, 3


@dataclass
class _Columns:
    """A batch of records as parallel arrays (topic, user index, type/membership code, ...)."""

    topic: np.ndarray
    user: np.ndarray
    code: np.ndarray
    ts: np.ndarray
    kind: np.ndarray
    extra: np.ndarray

    @staticmethod
    def make(topic: int, user, code, ts, kind: int, extra) -> _Columns:
        n = len(ts)
        return _Columns(
            np.full(n, topic, dtype=np.int8),
            np.asarray(user, dtype=np.int64),
            np.asarray(code, dtype=np.int64),
            np.asarray(ts, dtype=np.int64),
            np.full(n, kind, dtype=np.int8),
            np.asarray(extra, dtype=np.int64),
        )

    @staticmethod
    def concat(parts: Sequence[_Columns]) -> _Columns:
        names = ("topic", "user", "code", "ts", "kind", "extra")
        return _Columns(*(np.concatenate([getattr(p, n) for p in parts]) for n in names))

    def take(self, index: np.ndarray) -> _Columns:
        names = ("topic", "user", "code", "ts", "kind", "extra")
        return _Columns(*(getattr(self, n)[index] for n in names))


class _ChunkMaker:
    """Builds the records of one event-time chunk; all randomness comes from (seed, chunk)."""

    def __init__(self, spec: TrafficSpec, population: _Population) -> None:
        self.spec = spec
        self.pop = population
        self.n_types = len(spec.event_types)
        self.n_crit = len(spec.critical_event_types)
        self.spam_p = self._spam_mix(spec)

    @staticmethod
    def _spam_mix(spec: TrafficSpec) -> np.ndarray:
        """Spam is critical traffic, but not of the effect type, so spammers (in every
        experiment) do not drown the treatment effect in whichever group they land."""
        shares = np.array([_TYPE_MIX.get(t, _OTHER_SHARE) for t in spec.critical_event_types])
        if len(shares) > 1:
            shares[spec.critical_event_types.index(spec.effect_event_type)] = 0.0
        return shares / shares.sum()

    def make(self, cycle: int, index: int, start: int, end: int) -> _Columns:
        rng = np.random.default_rng([self.spec.seed, 1 + cycle, index])
        events = self._events(rng, start, end)
        acts = self._activations(rng, start, end)
        ties = self._activation_ties(rng, acts)
        spam = self._spam(rng, start, end)
        good = _Columns.concat([events, ties, acts])
        dups = good.take(np.flatnonzero(rng.random(len(good.ts)) < self.spec.duplicate_rate))
        dups.kind[:] = _K_DUP
        bad = self._malformed(rng, good)
        return _Columns.concat([good, spam, dups, bad])

    def _events(self, rng: np.random.Generator, start: int, end: int) -> _Columns:
        hours = (end - start) / HOUR_MS
        counts = rng.poisson(self.pop.rates * hours).ravel()
        cell = np.repeat(np.arange(counts.size), counts)
        user, code = np.divmod(cell, self.n_types)
        ts = rng.integers(start, end, len(cell))
        snap = rng.random(len(ts)) < _BOUNDARY_RATE
        ts[snap] = np.maximum(ts[snap] // self.spec.window_ms * self.spec.window_ms, start)
        extra = rng.integers(1, 2**40, len(ts))
        base = _Columns.make(_T_EVENT, user, code, ts, _K_GOOD, extra)
        return _Columns.concat([base, self._companions(rng, base)])

    def _companions(self, rng: np.random.Generator, base: _Columns) -> _Columns:
        """Events of another type with the same user and ts (equal timestamps)."""
        critical = base.code < self.n_crit
        pick = np.flatnonzero(critical & (rng.random(len(base.ts)) < self.spec.equal_ts_rate))
        if self.n_crit > 1:
            shift = rng.integers(1, self.n_crit, len(pick))
            code = (base.code[pick] + shift) % self.n_crit
        elif self.n_types > 1:
            code = np.full(len(pick), self.n_crit)
        else:
            pick = pick[:0]
            code = pick
        extra = rng.integers(1, 2**40, len(pick))
        return _Columns.make(_T_EVENT, base.user[pick], code, base.ts[pick], _K_GOOD, extra)

    def _activations(self, rng: np.random.Generator, start: int, end: int) -> _Columns:
        lam = self.spec.activations_per_user * (end - start) / self.spec.duration_ms
        counts = rng.poisson(lam, len(self.pop.member_user))
        user = np.repeat(self.pop.member_user, counts)
        code = np.repeat(self.pop.member_code, counts)
        ts = rng.integers(start, end, len(user))
        return _Columns.make(_T_ACT, user, code, ts, _K_GOOD, np.zeros(len(ts)))

    def _activation_ties(self, rng: np.random.Generator, acts: _Columns) -> _Columns:
        """Critical events stamped exactly at an activation: they count (ts >= trigger)."""
        pick = np.flatnonzero(rng.random(len(acts.ts)) < _ACTIVATION_TIE_RATE)
        code = rng.integers(0, self.n_crit, len(pick))
        extra = rng.integers(1, 2**40, len(pick))
        return _Columns.make(_T_EVENT, acts.user[pick], code, acts.ts[pick], _K_GOOD, extra)

    def _spam(self, rng: np.random.Generator, start: int, end: int) -> _Columns:
        spec = self.spec
        lam = spec.spam_events_per_hour * (end - start) / HOUR_MS
        counts = rng.poisson(lam, spec.n_spammers)
        user = np.repeat(np.arange(spec.n_users, spec.n_users + spec.n_spammers), counts)
        code = rng.choice(self.n_crit, len(user), p=self.spam_p)
        ts = rng.integers(start, end, len(user))
        extra = rng.integers(1, 2**40, len(user))
        return _Columns.make(_T_EVENT, user, code, ts, _K_SPAM, extra)

    def _malformed(self, rng: np.random.Generator, good: _Columns) -> _Columns:
        """Broken copies of good records; `extra` selects the kind (and a sub-variant)."""
        n = rng.binomial(len(good.ts), self.spec.malformed_rate) if len(good.ts) else 0
        bad = good.take(rng.integers(0, len(good.ts), n))
        bad.kind[:] = _K_BAD
        variant = np.arange(n) % len(MALFORMED_KINDS)  # every kind, in turn
        bad.extra = rng.integers(0, 2**20, n) * len(MALFORMED_KINDS) + variant
        return bad


# ---------------------------------------------------------------- serialisation


class _Encoder:
    """Turns ordered columns into GeneratedRecords with precomputed byte templates."""

    def __init__(self, spec: TrafficSpec, population: _Population) -> None:
        self.pop = population
        self.keys = [str(u) for u in population.user_ids.tolist()]
        self.platforms = [_PLATFORMS[p] for p in population.platform.tolist()]
        self.event_tmpl = [_event_template(t) for t in spec.event_types]
        self.act_tmpl = [
            _activation_template(*population.group_of(c))
            for c in range(2 * len(population.experiments))
        ]
        self.kinds = KINDS

    def records(self, cols: _Columns) -> list[GeneratedRecord]:
        out: list[GeneratedRecord] = []
        append = out.append
        new = tuple.__new__  # GeneratedRecord(...) without the namedtuple __new__ wrapper
        record = GeneratedRecord
        keys, plats, ev_t, act_t, kinds = (
            self.keys, self.platforms, self.event_tmpl, self.act_tmpl, self.kinds,
        )  # fmt: skip
        ids = self.pop.user_ids
        rows = zip(
            cols.topic.tolist(),
            ids[cols.user].tolist(),
            cols.user.tolist(),
            cols.code.tolist(),
            cols.ts.tolist(),
            cols.kind.tolist(),
            cols.extra.tolist(),
            strict=True,
        )
        for topic, uid, u, code, ts, kind, extra in rows:
            if kind == _K_BAD:
                append(self._malformed(topic, uid, u, code, ts, extra))
            elif topic == _T_EVENT:
                value = ev_t[code] % (uid, ts, plats[u], extra)
                append(new(record, (TOPIC_EVENTS, keys[u], value, ts, kinds[kind])))
            else:
                value = act_t[code] % (uid, ts)
                append(new(record, (TOPIC_ACTIVATIONS, keys[u], value, ts, kinds[kind])))
        return out

    def _malformed(
        self, topic: int, uid: int, u: int, code: int, ts: int, extra: int
    ) -> GeneratedRecord:
        variant = MALFORMED_KINDS[extra % len(MALFORMED_KINDS)]
        sub = extra // len(MALFORMED_KINDS)
        if topic == _T_EVENT:
            name = TOPIC_EVENTS
            fields = {"user_id": uid, "event_type": self.pop.spec.event_types[code], "ts": ts}
        else:
            name = TOPIC_ACTIVATIONS
            exp, group = self.pop.group_of(code)
            fields = {"user_id": uid, "experiment_hash": exp, "experiment_group": group, "ts": ts}
        value = _malformed_value(variant, fields, sub)
        return GeneratedRecord(name, self.keys[u], value, ts, MALFORMED)


def _quoted(text: str) -> str:
    """A JSON string literal that is safe inside a %-template."""
    return orjson.dumps(text).decode().replace("%", "%%")


def _event_template(event_type: str) -> bytes:
    extra = "query_id" if event_type == "search" else "pin_id"
    head = '{"user_id":%d,"event_type":' + _quoted(event_type)
    return (head + ',"ts":%d,"platform":"%s","' + extra + '":%d}').encode()


def _activation_template(experiment: str, group: str) -> bytes:
    head = '{"user_id":%d,"experiment_hash":' + _quoted(experiment)
    return (head + ',"experiment_group":' + _quoted(group) + ',"ts":%d}').encode()


def _json(fields: dict[str, Any]) -> bytes:
    """Hand-rolled JSON so malformed variants can put raw text (e.g. 42.0) into a field."""
    return ("{" + ",".join(f'"{k}":{_json_text(v)}' for k, v in fields.items()) + "}").encode()


def _malformed_value(variant: str, fields: dict[str, Any], sub: int) -> bytes | None:
    """One broken message of the given kind, built from the fields of a good one."""
    if variant == "null_value":
        return None
    if variant == "not_json":
        if sub % 2:
            return f"user_id={fields['user_id']};ts={fields['ts']}".encode()
        good = _json(fields)
        return good[: len(good) // 2]
    if variant == "json_array":
        return ("[" + ",".join(_json_text(v) for v in fields.values()) + "]").encode()
    if variant == "missing_field":
        names = list(fields)
        dropped = names[sub % len(names)]
        return _json({k: v for k, v in fields.items() if k != dropped})
    broken = dict(fields)
    if variant == "ts_string":
        broken["ts"] = str(fields["ts"])
    else:  # user_id_float
        broken["user_id"] = _Raw(f"{fields['user_id']}.0")
    return _json(broken)


class _Raw(str):
    """A JSON value written as-is (not quoted) by _json."""


def _json_text(value: Any) -> str:
    if isinstance(value, _Raw):
        return str(value)
    return orjson.dumps(value).decode() if isinstance(value, str) else str(value)


# ---------------------------------------------------------------- generation


class TrafficGenerator:
    """Pure generation: the ordered messages of a spec, chunk by chunk (cached population)."""

    def __init__(self, spec: TrafficSpec) -> None:
        self.spec = spec

    @cached_property
    def population(self) -> _Population:
        return _Population(self.spec)

    def chunks(self, cycles: int | None = 1) -> Iterator[list[GeneratedRecord]]:
        """Lists of records in production order; cycles=None never ends (loop mode)."""
        spec = self.spec
        maker = _ChunkMaker(spec, self.population)
        encoder = _Encoder(spec, self.population)
        cycle = 0
        while cycles is None or cycle < cycles:
            base = spec.start_ms + cycle * spec.duration_ms
            for index, start in enumerate(range(0, spec.duration_ms, spec.chunk_ms)):
                end = min(start + spec.chunk_ms, spec.duration_ms)
                cols = maker.make(cycle, index, base + start, base + end)
                yield encoder.records(cols.take(self._order(cycle, index, cols)))
            cycle += 1

    def _order(self, cycle: int, index: int, cols: _Columns) -> np.ndarray:
        """Production order: by ts + jitter in [0, disorder]; a later record is then never
        more than disorder_ms behind any earlier one, and chunks never overlap in ts."""
        rng = np.random.default_rng([self.spec.seed, 1 + cycle, index, 0x0D])
        jitter = rng.integers(0, self.spec.disorder_ms + 1, len(cols.ts))
        return np.argsort(cols.ts + jitter, kind="stable")

    def __iter__(self) -> Iterator[GeneratedRecord]:
        for chunk in self.chunks():
            yield from chunk


def generate(spec: TrafficSpec, cycles: int | None = 1) -> Iterator[GeneratedRecord]:
    """All records of `spec` in production order (cycles=None: endless, for loop mode)."""
    for chunk in TrafficGenerator(spec).chunks(cycles):
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


# ---------------------------------------------------------------- Kafka I/O

FLUSH_TIMEOUT_S = 120.0


class GenerationError(RuntimeError):
    """Messages could not be delivered; the message says how many and the first reason."""


def _make_producer(settings: Settings) -> Any:
    """The project's idempotent producer (lz4, linger 5 ms, murmur2_random, 1M queue):
    keyed by user_id, so a user's messages keep their production order in one partition."""
    from spark_jobs.streaming.kafka.producer import make_producer

    return make_producer(settings.kafka)


# Endless paced traffic (the demo, the platform) goes out in batches of up to a second: the
# embedded broker (Tansu's in-memory storage) gets slower with every record batch a partition
# holds and stops serving the partition after ~20-30k batches (README, Platform findings).
# With the default 5 ms linger a partition receiving 50 messages/s gets a batch per message
# and stalls within minutes; with 1 s it gets ~1 batch/s, i.e. hours. The demo's event time
# runs minutes behind the clock, so a second of batching changes nothing it shows.
LIVE_TRAFFIC_LINGER_MS = 1_000


def live_traffic_producer(settings: Settings) -> Any:
    """The producer for endless paced traffic: the project's, batching up to a second."""
    from spark_jobs.streaming.kafka.producer import make_producer

    return make_producer(settings.kafka, **{"linger.ms": LIVE_TRAFFIC_LINGER_MS})


class _Pacer:
    """Keeps message i at or after t0 + i / rate; sleeps only when >= 2 ms ahead (smooth)."""

    def __init__(self, rate: float | None) -> None:
        if rate is not None and rate <= 0:
            raise ValueError(f"rate must be positive messages/s, got {rate}")
        self.rate = rate
        self.started = time.monotonic()

    def wait(self, sent: int) -> None:
        if self.rate is None:
            return
        ahead = self.started + sent / self.rate - time.monotonic()
        if ahead >= 0.002:
            time.sleep(ahead)


def produce(
    spec: TrafficSpec,
    settings: Settings,
    rate: float | None = None,
    progress: bool = True,
    loop: bool = False,
    stop_event: threading.Event | None = None,
    producer: Any = None,
) -> GenerationReport:
    """Send the spec's traffic to Kafka in production order and wait for every delivery.

    rate is in messages/s (None: as fast as possible). loop=True keeps generating later
    event time (cycle k is the spec shifted by k * duration_ms) until stop_event is set.
    Message timestamps are the wall clock at production. Raises GenerationError when any
    delivery fails. `producer` replaces the Kafka producer (tests).
    """
    from tqdm import tqdm

    kafka = producer if producer is not None else _make_producer(settings)
    failures: list[Any] = []
    report = GenerationReport()
    pacer = _Pacer(rate)
    bar = tqdm(desc="generate", unit="msg", disable=not progress, mininterval=0.5)
    started = time.perf_counter()
    try:
        _send_all(kafka, spec, loop, stop_event, pacer, report, failures, bar.update)
    finally:
        undelivered = kafka.flush(FLUSH_TIMEOUT_S)
        bar.close()
        report.elapsed_s = time.perf_counter() - started
    if failures:
        raise GenerationError(f"{len(failures)} message(s) not delivered; first: {failures[0]}")
    if undelivered:
        raise GenerationError(f"{undelivered} message(s) still undelivered after flush")
    return report


def _send_all(
    kafka: Any,
    spec: TrafficSpec,
    loop: bool,
    stop_event: threading.Event | None,
    pacer: _Pacer,
    report: GenerationReport,
    failures: list[Any],
    advance: Callable[[int], Any],
) -> None:
    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(err)

    sent = 0
    for chunk in TrafficGenerator(spec).chunks(None if loop else 1):
        for record in chunk:
            if failures or (stop_event is not None and stop_event.is_set()):
                return
            pacer.wait(sent)
            _produce_one(kafka, record, on_delivery)
            report.add(record.topic, record.kind)
            sent += 1
            if sent % 1024 == 0:
                kafka.poll(0)
                advance(1024)
        kafka.poll(0)


def _produce_one(kafka: Any, record: GeneratedRecord, on_delivery: Callable) -> None:
    """produce(), waiting for queue space instead of failing when the local queue is full."""
    while True:
        try:
            kafka.produce(record.topic, value=record.value, key=record.key, on_delivery=on_delivery)
            return
        except BufferError:
            kafka.poll(0.05)


def run_for(
    spec: TrafficSpec,
    settings: Settings,
    seconds: float,
    rate: float | None = None,
    progress: bool = True,
    producer: Any = None,
) -> GenerationReport:
    """Continuous generation (loop mode) for a wall-clock duration, then flush."""
    stop = threading.Event()
    timer = threading.Timer(seconds, stop.set)
    timer.daemon = True
    timer.start()
    try:
        return produce(spec, settings, rate, progress, True, stop, producer)
    finally:
        timer.cancel()
