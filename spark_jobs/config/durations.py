"""Duration parsing: every duration in Tideline is configuration (`90s`, `15m`, `PT15M`, `0`)."""

from __future__ import annotations

import re

_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_SIMPLE = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d)\s*$")
_ISO = re.compile(
    r"^P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$"
)


class DurationError(ValueError):
    """A duration text that is neither `<int><unit>`, ISO 8601, nor `0`."""


def parse_duration_ms(text: str | int) -> int:
    """Return the duration in milliseconds; ints are taken as milliseconds already."""
    if isinstance(text, bool):
        raise DurationError(f"not a duration: {text!r}")
    if isinstance(text, int):
        if text < 0:
            raise DurationError(f"negative duration: {text}")
        return text
    raw = str(text).strip()
    if raw == "0":
        return 0
    simple = _SIMPLE.match(raw)
    if simple:
        return int(simple.group(1)) * _UNIT_MS[simple.group(2)]
    iso = _ISO.match(raw.upper())
    if iso and raw.upper() not in ("P", "PT"):
        days = int(iso.group("d") or 0)
        hours = int(iso.group("h") or 0)
        minutes = int(iso.group("m") or 0)
        seconds = float(iso.group("s") or 0)
        return round(((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000)
    raise DurationError(
        f"not a duration: {text!r} (write <int><unit> with unit ms, s, m, h or d, "
        "e.g. 90s or 15m; ISO 8601 like PT15M; or 0)"
    )


def format_duration_ms(ms: int) -> str:
    """Shortest exact `<int><unit>` text for a millisecond count (inverse of parse)."""
    if ms == 0:
        return "0"
    for unit in ("d", "h", "m", "s"):
        if ms % _UNIT_MS[unit] == 0:
            return f"{ms // _UNIT_MS[unit]}{unit}"
    return f"{ms}ms"
