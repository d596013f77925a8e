"""What the feed traffic looks like: `SamplesTrafficSpec` and the averages that size a run."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from spark_jobs.settings import SamplesSettings


@dataclass(frozen=True)
class SamplesTrafficSpec:
    """What the generated traffic looks like.

    Rates are per view: play_rate and skip_rate of views (the rest just scroll past), the
    others per played view (likes, favorites, comments, shares). views_per_s is how fast event
    time fills with views. window_ms is the attribution window that `outside_window_share`
    engagements miss (keep it equal to samples.window); max_disorder_ms bounds how far behind
    the largest event time so far a message may arrive (keep it below samples.lateness);
    `from_settings` does both.
    """

    users: int = 20_000
    posts: int = 100_000
    user_skew: float = 0.6
    post_skew: float = 0.9
    views_per_s: float = 100.0
    session_views: float = 12.0
    window_ms: int = 600_000
    max_disorder_ms: int = 60_000
    skip_rate: float = 0.38
    play_rate: float = 0.52
    like_rate: float = 0.1
    favorite_rate: float = 0.03
    comment_rate: float = 0.015
    share_rate: float = 0.012
    null_view_id_share: float = 0.25
    late_view_share: float = 0.03
    outside_window_share: float = 0.01
    rewatch_share: float = 0.02
    duplicate_view_share: float = 0.005
    duplicate_signal_share: float = 0.03
    stray_share: float = 0.005
    unknown_signal_share: float = 0.0
    malformed_share: float = 0.0
    mismatch_share: float = 0.0
    seed: int = 11

    def __post_init__(self) -> None:
        if self.users <= 0 or self.posts <= 1:
            raise ValueError("users must be positive and posts at least 2")
        if self.views_per_s <= 0 or self.session_views < 1:
            raise ValueError("views_per_s must be positive and session_views >= 1")
        if self.window_ms < 10_000 or self.max_disorder_ms < 0:
            raise ValueError("window_ms must be at least 10 s and max_disorder_ms >= 0")
        if self.skip_rate + self.play_rate > 1:
            raise ValueError("skip_rate + play_rate must be at most 1")
        shares = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                  if f.name.endswith(("_rate", "_share"))}
        bad = [name for name, value in shares.items() if not 0 <= value <= 1]
        if bad:
            raise ValueError(f"{', '.join(bad)} must lie in [0, 1]")

    @classmethod
    def from_settings(cls, samples: SamplesSettings, **overrides: Any) -> SamplesTrafficSpec:
        """A spec for the job's attribution window, with half its lateness as the disorder
        bound (as the experiment traffic does), so nothing well-formed is late."""
        base: dict[str, Any] = {"window_ms": samples.window_ms,
                                "max_disorder_ms": samples.lateness_ms // 2}
        base.update(overrides)
        return cls(**base)


DEFAULT_SPEC = SamplesTrafficSpec()


def mean_view_ms(spec: SamplesTrafficSpec = DEFAULT_SPEC) -> float:
    """How long a view lasts on average, until the next view of its session (ms)."""
    played = 32_500 * 1.05  # video length 5-60 s, watched 0.5-1.6 times
    rest = 1 - spec.skip_rate - spec.play_rate
    return spec.skip_rate * 1650 + spec.play_rate * played + rest * 3400 + 525


def expected_rate(spec: SamplesTrafficSpec = DEFAULT_SPEC) -> float:
    """Messages per view on average (views, engagements, duplicates): sizing a run."""
    engaged = (spec.skip_rate * (1 + spec.like_rate / 20)
               + spec.play_rate * (1 + spec.like_rate + spec.favorite_rate + spec.comment_rate
                                   + spec.share_rate))
    return (1 + spec.duplicate_view_share + engaged * (1 + spec.duplicate_signal_share)
            + spec.stray_share)

