"""`tideline config show`: every effective setting, the layer it came from and what it means.

It reads only the settings object and its sections' declarations, so it knows every section
without importing one: a new setting shows up here by being declared.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from spark_jobs.config.fields import declarations, is_section

IN_CODE = "set in code"  # settings built from a tree (build_settings) carry no sources
DERIVED = "derived"
_WIDEST = (56, 32)  # longer cells are not padded, so one long map does not push all lines


def sections(settings: Any) -> Iterator[tuple[str, Any]]:
    """(name, section object) of a settings object, in declaration order."""
    for f in dataclasses.fields(settings):
        value = getattr(settings, f.name)
        if is_section(value):
            yield f.name, value


def show_lines(settings: Any, only: str | None = None) -> list[str]:
    """`section.key = value   (source)   # meaning [unit]`, one line per setting; values as
    a user writes them, credentials in maps masked."""
    rows = []
    for name, section in sections(settings):
        if only is not None and name != only:
            continue
        written = settings.raw.get(name, {})
        for d in declarations(section):
            key = f"{name}.{d.key}"
            value, given = getattr(section, d.attribute), written.get(d.key)
            source = " + ".join(settings.sources.get(key, (IN_CODE,)))
            if value is not None and d.setting.kind.parse(given, key) is None:
                source += f", {DERIVED}"
            unit = f" [{d.setting.unit}]" if d.setting.unit else ""
            shown = d.setting.kind.show(value, given)
            rows.append((f"{key} = {shown}", f"({source})", f"# {d.setting.meaning}{unit}"))
    return _aligned(rows)


def _aligned(rows: list[tuple[str, str, str]]) -> list[str]:
    widths = [max((len(r[i]) for r in rows if len(r[i]) <= _WIDEST[i]), default=0) for i in (0, 1)]
    return [
        f"{left.ljust(widths[0])}   {source.ljust(widths[1])}   {meaning}"
        for left, source, meaning in rows
    ]
