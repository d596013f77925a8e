"""Tumbling event-time windows, named by their end: W is a multiple of `window` since the epoch."""

from __future__ import annotations


def window_end(ts: int, window_ms: int) -> int:
    """End of the window holding ts: the window [W - window, W) contains ts."""
    return (ts // window_ms + 1) * window_ms


def last_closed_window(watermark_ms: int, window_ms: int) -> int:
    """Latest window end W <= watermark: a window is final once the watermark passes W."""
    return (watermark_ms // window_ms) * window_ms


def period_last_window(period_start: int, period_ms: int, window_ms: int) -> int:
    """End of the last window overlapping [start, start + period): it holds start + period - 1."""
    return window_end(period_start + period_ms - 1, window_ms)


def hour_of(ts: int) -> int:
    """Clock hour of event time, `floor(ts / 1h)`, the unit of per-user capping."""
    return ts // 3_600_000


def is_late(ts: int, watermark_ms: int) -> bool:
    """A record behind the watermark when it reaches a stateful step is late (not counted)."""
    return ts < watermark_ms


def late_detail(ts: int, watermark_ms: int) -> str:
    """The dead-letter detail of a late record: how far behind the watermark it was."""
    return f"event time {ts} is {watermark_ms - ts} ms behind the watermark {watermark_ms}"
