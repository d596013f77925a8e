"""The feed's draws: who watches (Zipf-like activity), what (Zipf-like post popularity), on
which device, and the ids a ranking system logs; all from one seeded random source."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass

from spark_jobs.samples.traffic.spec import SamplesTrafficSpec
from spark_jobs.streaming.traffic.popularity import Popularity

_SURFACES = (("for_you", 0.8), ("following", 0.12), ("explore", 0.05), ("search", 0.03))
_DEVICES = {
    "ios": (("iPhone15,3", "iPhone14,5", "iPhone16,1", "iPhone13,2"), ("17.6.1", "18.1", "18.2")),
    "android": (("SM-S918B", "Pixel 8", "SM-A546E", "2201117TY", "CPH2581"),
                ("13", "14", "15")),
}
_LOCALES = (("en-US", 0.45), ("en-GB", 0.08), ("es-MX", 0.1), ("pt-BR", 0.1), ("de-DE", 0.07),
            ("fr-FR", 0.06), ("ja-JP", 0.06), ("id-ID", 0.08))
_NETWORKS = (("wifi", 0.6), ("5g", 0.2), ("4g", 0.18), ("3g", 0.02))
_APP_VERSIONS = (("34.2.1", 0.55), ("34.1.0", 0.3), ("33.9.4", 0.15))
FEED_PAGE = 8  # views served per feed request


def weighted(options: tuple[tuple[str, float], ...], rng: random.Random) -> str:
    """One name of (name, weight) options, drawn in proportion to its weight."""
    point = rng.random() * sum(w for _, w in options)
    for name, weight in options:
        point -= weight
        if point < 0:
            return name
    return options[-1][0]


@dataclass(frozen=True)
class Profile:
    """What stays the same for a user: locale, device, app."""

    lang: str
    device: str
    device_model: str
    os_version: str
    app_version: str


class FeedDraws:
    """Draws of one spec, from one seeded random source (`rng`)."""

    def __init__(self, spec: SamplesTrafficSpec) -> None:
        self.spec = spec
        self.rng = random.Random(spec.seed)
        shuffle = random.Random(spec.seed + 1)
        self._users = Popularity(range(100_001, 100_001 + spec.users), spec.user_skew, shuffle)
        self._posts = Popularity(range(7_000_001, 7_000_001 + spec.posts), spec.post_skew,
                                 shuffle)
        self._profiles: dict[int, Profile] = {}

    def user(self) -> int:
        return self._users.draw(self.rng)

    def post(self) -> int:
        return self._posts.draw(self.rng)

    def profile(self, user_id: int) -> Profile:
        found = self._profiles.get(user_id)
        if found is None:
            rng = random.Random(self.spec.seed * 1_000_003 + user_id)  # order independent
            lang = weighted(_LOCALES, rng)
            device = "ios" if rng.random() < 0.45 else "android"
            models, versions = _DEVICES[device]
            found = Profile(lang, device, rng.choice(models), rng.choice(versions),
                            weighted(_APP_VERSIONS, rng))
            self._profiles[user_id] = found
        return found

    def surface(self) -> str:
        return weighted(_SURFACES, self.rng)

    def network(self) -> str:
        return weighted(_NETWORKS, self.rng)

    def hex_id(self, bits: int) -> str:
        return f"{self.rng.getrandbits(bits):0{bits // 4}x}"

    def view_id(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def delay(self, ts: int, late: bool = False) -> int:
        """Arrival in Kafka: most messages within a second or two, late ones near the bound."""
        bound = self.spec.max_disorder_ms
        if bound == 0:
            return ts
        if late:
            return ts + self.rng.randint(bound // 2, bound)
        return ts + min(bound, int(self.rng.expovariate(1.0) * min(bound, 60_000) / 40))
