"""The event schedule: the records of one event-time chunk as parallel columns.

All randomness of a chunk comes from (seed, cycle, chunk), so any chunk can be made alone
and loop mode (cycle k) is the same traffic shifted by k * duration_ms. Records are drawn
per user and type from Poisson counts, then the edge cases are added on top: events at an
activation's ts, equal timestamps of distinct types, window boundaries, spammers over the
cap, exact duplicates and malformed copies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from spark_jobs.experiments.traffic.population import Population, type_shares
from spark_jobs.experiments.traffic.spec import HOUR_MS, MALFORMED_KINDS, TrafficSpec

_ACTIVATION_TIE_RATE = 0.1  # events stamped exactly at an activation's ts
_BOUNDARY_RATE = 0.003  # events snapped onto a window boundary

T_EVENT, T_ACT = 0, 1
K_GOOD, K_DUP, K_BAD, K_SPAM = 0, 1, 2, 3  # index into KINDS


@dataclass
class Columns:
    """A batch of records as parallel arrays (topic, user index, type/membership code, ...)."""

    topic: np.ndarray
    user: np.ndarray
    code: np.ndarray
    ts: np.ndarray
    kind: np.ndarray
    extra: np.ndarray

    @staticmethod
    def make(topic: int, user, code, ts, kind: int, extra) -> Columns:
        n = len(ts)
        return Columns(
            np.full(n, topic, dtype=np.int8),
            np.asarray(user, dtype=np.int64),
            np.asarray(code, dtype=np.int64),
            np.asarray(ts, dtype=np.int64),
            np.full(n, kind, dtype=np.int8),
            np.asarray(extra, dtype=np.int64),
        )

    @staticmethod
    def concat(parts: Sequence[Columns]) -> Columns:
        names = ("topic", "user", "code", "ts", "kind", "extra")
        return Columns(*(np.concatenate([getattr(p, n) for p in parts]) for n in names))

    def take(self, index: np.ndarray) -> Columns:
        names = ("topic", "user", "code", "ts", "kind", "extra")
        return Columns(*(getattr(self, n)[index] for n in names))


class ChunkMaker:
    """Builds the records of one event-time chunk; all randomness comes from (seed, chunk)."""

    def __init__(self, spec: TrafficSpec, population: Population) -> None:
        self.spec = spec
        self.pop = population
        self.n_types = len(spec.event_types)
        self.n_crit = len(spec.critical_event_types)
        self.spam_p = self._spam_mix(spec)

    @staticmethod
    def _spam_mix(spec: TrafficSpec) -> np.ndarray:
        """Spam is critical traffic, but not of the effect type, so spammers (in every
        experiment) do not drown the treatment effect in whichever group they land."""
        shares = type_shares(spec.critical_event_types)
        if len(shares) > 1:
            shares[spec.critical_event_types.index(spec.effect_event_type)] = 0.0
        return shares / shares.sum()

    def make(self, cycle: int, index: int, start: int, end: int) -> Columns:
        rng = np.random.default_rng([self.spec.seed, 1 + cycle, index])
        events = self._events(rng, start, end)
        acts = self._activations(rng, start, end)
        ties = self._activation_ties(rng, acts)
        spam = self._spam(rng, start, end)
        good = Columns.concat([events, ties, acts])
        dups = good.take(np.flatnonzero(rng.random(len(good.ts)) < self.spec.duplicate_rate))
        dups.kind[:] = K_DUP
        bad = self._malformed(rng, good)
        return Columns.concat([good, spam, dups, bad])

    def _events(self, rng: np.random.Generator, start: int, end: int) -> Columns:
        hours = (end - start) / HOUR_MS
        counts = rng.poisson(self.pop.rates * hours).ravel()
        cell = np.repeat(np.arange(counts.size), counts)
        user, code = np.divmod(cell, self.n_types)
        ts = rng.integers(start, end, len(cell))
        snap = rng.random(len(ts)) < _BOUNDARY_RATE
        ts[snap] = np.maximum(ts[snap] // self.spec.window_ms * self.spec.window_ms, start)
        extra = rng.integers(1, 2**40, len(ts))
        base = Columns.make(T_EVENT, user, code, ts, K_GOOD, extra)
        return Columns.concat([base, self._companions(rng, base)])

    def _companions(self, rng: np.random.Generator, base: Columns) -> Columns:
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
        return Columns.make(T_EVENT, base.user[pick], code, base.ts[pick], K_GOOD, extra)

    def _activations(self, rng: np.random.Generator, start: int, end: int) -> Columns:
        lam = self.spec.activations_per_user * (end - start) / self.spec.duration_ms
        counts = rng.poisson(lam, len(self.pop.member_user))
        user = np.repeat(self.pop.member_user, counts)
        code = np.repeat(self.pop.member_code, counts)
        ts = rng.integers(start, end, len(user))
        return Columns.make(T_ACT, user, code, ts, K_GOOD, np.zeros(len(ts)))

    def _activation_ties(self, rng: np.random.Generator, acts: Columns) -> Columns:
        """Critical events stamped exactly at an activation: they count (ts >= trigger)."""
        pick = np.flatnonzero(rng.random(len(acts.ts)) < _ACTIVATION_TIE_RATE)
        code = rng.integers(0, self.n_crit, len(pick))
        extra = rng.integers(1, 2**40, len(pick))
        return Columns.make(T_EVENT, acts.user[pick], code, acts.ts[pick], K_GOOD, extra)

    def _spam(self, rng: np.random.Generator, start: int, end: int) -> Columns:
        spec = self.spec
        lam = spec.spam_events_per_hour * (end - start) / HOUR_MS
        counts = rng.poisson(lam, spec.n_spammers)
        user = np.repeat(np.arange(spec.n_users, spec.n_users + spec.n_spammers), counts)
        code = rng.choice(self.n_crit, len(user), p=self.spam_p)
        ts = rng.integers(start, end, len(user))
        extra = rng.integers(1, 2**40, len(user))
        return Columns.make(T_EVENT, user, code, ts, K_SPAM, extra)

    def _malformed(self, rng: np.random.Generator, good: Columns) -> Columns:
        """Broken copies of good records; `extra` selects the kind (and a sub-variant)."""
        n = rng.binomial(len(good.ts), self.spec.malformed_rate) if len(good.ts) else 0
        bad = good.take(rng.integers(0, len(good.ts), n))
        bad.kind[:] = K_BAD
        variant = np.arange(n) % len(MALFORMED_KINDS)  # every kind, in turn
        bad.extra = rng.integers(0, 2**20, n) * len(MALFORMED_KINDS) + variant
        return bad
