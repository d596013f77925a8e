"""The users of the traffic: ids, activity, platforms, memberships and event rates.

Fixed for a spec and independent of time, so every event-time chunk draws from the same
population. Memberships come from a stable hash, not from the RNG stream, so they do not
change when another part of the spec does.
"""

from __future__ import annotations

import numpy as np

from spark_jobs.experiments.traffic.ramps import GROUPS
from spark_jobs.experiments.traffic.spec import USER_ID_BASE, TrafficSpec

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
PLATFORMS = (b"web", b"ios", b"android")


def type_shares(event_types: tuple[str, ...]) -> np.ndarray:
    """The unnormalised share of each event type in a user's events."""
    return np.array([_TYPE_MIX.get(t, _OTHER_SHARE) for t in event_types])


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


class Population:
    """Per-user facts fixed for a spec: ids, activity, memberships, groups, event rates."""

    def __init__(self, spec: TrafficSpec) -> None:
        self.spec = spec
        n_all = spec.n_users + spec.n_spammers
        self.user_ids = np.arange(USER_ID_BASE, USER_ID_BASE + n_all, dtype=np.int64)
        rng = np.random.default_rng([spec.seed, 0xB0B])
        activity = rng.gamma(2.0, 0.5, n_all)
        self.platform = rng.integers(0, len(PLATFORMS), n_all)
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
        shares = type_shares(spec.event_types)
        rates = np.outer(activity, shares / shares.sum()) * spec.events_per_user_hour
        effect_col = spec.event_types.index(spec.effect_event_type)
        rates[:, effect_col] *= (1.0 + spec.effect) ** n_treat
        return rates

    def group_of(self, code: int) -> tuple[str, str]:
        """(experiment_hash, experiment_group) of a membership code 2 * exp + treated."""
        return self.experiments[code // 2], GROUPS[code % 2]
