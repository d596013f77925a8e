"""A user's pre-exposure activity, the CUPED covariate x (issue 17; core/metrics.py).

x(user, event type, period) = the user's clean events of the type in the `windows` whole
windows just before the window holding their first trigger in the period: with T that
window's end and w the window length, the events with T - w - windows*w <= ts < T - w.
Whole windows keep the state small (one count per event type and window, not a timestamp
per event) and make x final exactly when the trigger's window closes: every event before
the trigger's window that arrives after that is behind the watermark.

A count is needed while a future first trigger can still look back at it. A first trigger
not seen yet lies at or after the watermark (an earlier one is late), so a window ending
at or before `watermark - (windows + 1) * w` can go.
"""

from __future__ import annotations

from spark_jobs.experiments.core.tumbling_windows import window_end


def pre_exposure_windows(lookback_ms: int, window_ms: int) -> int:
    """How many whole windows a lookback covers (rounded up; 0 turns CUPED's x off)."""
    return -(-lookback_ms // window_ms)


def pre_exposure_range(first_trigger: int, window_ms: int, windows: int) -> tuple[int, int]:
    """[low, high): the event times counted as pre-exposure for a first trigger."""
    high = window_end(first_trigger, window_ms) - window_ms
    return high - windows * window_ms, high


class PreExposureHistory:
    """Counts of a user's clean events per (event type, window end), kept for the lookback."""

    __slots__ = ("counts", "window_ms", "windows")

    def __init__(self, window_ms: int, windows: int,
                 counts: dict[tuple[str, int], int] | None = None) -> None:
        self.window_ms = window_ms
        self.windows = windows
        self.counts: dict[tuple[str, int], int] = counts or {}

    def add(self, event_type: str, ts: int) -> None:
        """Count one accepted clean event (a no-op when the lookback is 0)."""
        if self.windows:
            key = (event_type, window_end(ts, self.window_ms))
            self.counts[key] = self.counts.get(key, 0) + 1

    def volume_before(self, first_trigger: int) -> dict[str, int]:
        """x per event type for this first trigger (types without events left out)."""
        low, high = pre_exposure_range(first_trigger, self.window_ms, self.windows)
        volume: dict[str, int] = {}
        for (event_type, end), count in self.counts.items():
            if low < end <= high:  # the window [end - w, end) lies inside [low, high)
                volume[event_type] = volume.get(event_type, 0) + count
        return volume

    def forget_before(self, watermark_ms: int) -> None:
        """Drop the windows no first trigger still to come can look back at."""
        if self.counts:
            oldest_needed = watermark_ms - (self.windows + 1) * self.window_ms
            for key in [k for k in self.counts if k[1] <= oldest_needed]:
                del self.counts[key]

    def next_expiry(self) -> int | None:
        """The watermark at which the oldest count can go (a window end), or None."""
        if not self.counts:
            return None
        return min(end for _, end in self.counts) + (self.windows + 1) * self.window_ms
