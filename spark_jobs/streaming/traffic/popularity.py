"""Ids drawn by Zipf-like popularity: a few very busy accounts and a long tail."""

from __future__ import annotations

import itertools
import random
from bisect import bisect_right
from collections.abc import Iterable


def cumulative(weights: Iterable[float]) -> list[float]:
    """Running sums of weights, for `pick`."""
    return list(itertools.accumulate(weights))


def pick(cumulative_weights: list[float], rng: random.Random) -> int:
    """An index drawn in proportion to its weight (one rng.random() call)."""
    return bisect_right(cumulative_weights, rng.random() * cumulative_weights[-1])


class Popularity:
    """`ids` ranked by popularity: rank k has weight 1 / (k + 1) ** skew (0 = uniform).

    The ids are shuffled over the ranks by `shuffle`, so an id carries no hint of how busy
    it is; popularities built one after the other from one `shuffle` stay reproducible.
    """

    def __init__(self, ids: Iterable[int], skew: float, shuffle: random.Random) -> None:
        self.ids = list(ids)
        self.weights = cumulative(1 / (k + 1) ** skew for k in range(len(self.ids)))
        shuffle.shuffle(self.ids)

    def draw(self, rng: random.Random) -> int:
        return self.ids[pick(self.weights, rng)]
