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
    """Counts of a user's clean events per window end and event type, kept for the lookback.

    Keyed by window end first, so that forgetting and the next expiry look at one key per
    window, and `oldest` makes both O(1) when nothing is due (they run on every touch of a
    user: the job's hot path).
    """

    __slots__ = ("counts", "oldest", "window_ms", "windows")

    def __init__(self, window_ms: int, windows: int,
                 counts: dict[int, dict[str, int]] | None = None) -> None:
        self.window_ms = window_ms
        self.windows = windows
        self.counts: dict[int, dict[str, int]] = counts or {}
        self.oldest: int | None = min(self.counts) if self.counts else None

    def add(self, event_type: str, ts: int) -> None:
        """Count one accepted clean event (a no-op when the lookback is 0)."""
        if not self.windows:
            return
        end = window_end(ts, self.window_ms)
        per_type = self.counts.get(end)
        if per_type is None:
            self.counts[end] = {event_type: 1}
            if self.oldest is None or end < self.oldest:
                self.oldest = end
        else:
            per_type[event_type] = per_type.get(event_type, 0) + 1

    def volume_before(self, first_trigger: int) -> dict[str, int]:
        """x per event type for this first trigger (types without events left out)."""
        low, high = pre_exposure_range(first_trigger, self.window_ms, self.windows)
        volume: dict[str, int] = {}
        for end, per_type in self.counts.items():
            if low < end <= high:  # the window [end - w, end) lies inside [low, high)
                for event_type, count in per_type.items():
                    volume[event_type] = volume.get(event_type, 0) + count
        return volume

    def forget_before(self, watermark_ms: int) -> None:
        """Drop the windows no first trigger still to come can look back at."""
        oldest_needed = watermark_ms - (self.windows + 1) * self.window_ms
        if self.oldest is None or self.oldest > oldest_needed:
            return
        for end in [e for e in self.counts if e <= oldest_needed]:
            del self.counts[end]
        self.oldest = min(self.counts) if self.counts else None

    def next_expiry(self) -> int | None:
        """The watermark at which the oldest count can go (a window end), or None."""
        if self.oldest is None:
            return None
        return self.oldest + (self.windows + 1) * self.window_ms
