"""applyInPandasWithState's GroupState in memory: a bucketed processor driven without Spark.

A bucketed processor (processor.py) reads and writes its bucket through the few GroupState
calls below. Tests and the join's CPU benchmark (bench/samples_join_cpu.py) call it bucket by
bucket as Spark does, with one of these per bucket kept between calls as Spark keeps the
group's state, and set `watermark` and `hasTimedOut` before each call.
"""

from __future__ import annotations


class LocalGroupState:
    """One bucket's blob and event-time timeout, kept between calls."""

    def __init__(self) -> None:
        self.value: tuple[bytes] | None = None
        self.timeout: int | None = None
        self.watermark = 0
        self.hasTimedOut = False

    @property
    def getOption(self) -> tuple[bytes] | None:
        return self.value

    def getCurrentWatermarkMs(self) -> int:
        return self.watermark

    def update(self, value: tuple[bytes]) -> None:
        self.value = value

    def remove(self) -> None:
        self.value, self.timeout = None, None

    def setTimeoutTimestamp(self, ms: int) -> None:
        """Refused behind the watermark or at or before 0, as Spark refuses it."""
        if ms < self.watermark or ms <= 0:
            raise ValueError(f"timeout {ms} is behind the watermark {self.watermark} or not "
                             "positive")
        self.timeout = ms
