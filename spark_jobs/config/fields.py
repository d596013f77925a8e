"""The settings language: one line per setting, in the section of the system that owns it.

A section is a frozen dataclass whose fields are `setting(default, kind, meaning, unit=...)`
(as quixstreams' settings class): the defaults table, the config keys, the checks and
`tideline config show` all derive from these declarations, so adding a setting is one line.
A section may define `finish(values, done)`, a classmethod for what one key cannot check
alone (derived defaults, rules across keys); `done` holds the sections built before it.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SETTING = "tideline.setting"  # the dataclass field metadata key holding the declaration


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message says what to fix."""


class Kind:
    """How one setting is written and checked: `parse` turns what YAML read into the typed
    value or raises ConfigError naming the key; `show` writes the typed value back as a user
    would write it (`given` is what they wrote, None when unset)."""

    suffix = ""  # dropped from the field name to make the key (durations: period_ms -> period)

    def parse(self, value: Any, key: str) -> Any:
        raise NotImplementedError

    def show(self, value: Any, given: Any) -> str:
        return plain_text(value)


@dataclass(frozen=True)
class Setting:
    """One declared setting: its default as a user writes it, its kind, what it means."""

    default: Any
    kind: Kind
    meaning: str
    unit: str | None = None
    key: str | None = None  # None: the field name without the kind's suffix


def setting(default: Any, kind: Kind, meaning: str, *, unit: str | None = None,
            key: str | None = None) -> Any:
    """A dataclass field declaring one setting; the field's own default is the parsed one."""
    declared = Setting(default, kind, meaning, unit, key)
    typed = kind.parse(copy.deepcopy(default), key or "<declared default>")
    metadata = {SETTING: declared}
    if getattr(typed, "__hash__", None) is None:  # dict or list: dataclasses want a factory
        return dataclasses.field(default_factory=lambda: copy.deepcopy(typed), metadata=metadata)
    return dataclasses.field(default=typed, metadata=metadata)


@dataclass(frozen=True)
class Declared:
    """A setting as its section sees it: the attribute holding the typed value, the key."""

    attribute: str
    key: str
    setting: Setting


def declarations(section: type | object) -> tuple[Declared, ...]:
    """The settings of a section class (or instance), in declaration order."""
    found = []
    for f in dataclasses.fields(section):  # type: ignore[arg-type]
        declared = f.metadata.get(SETTING)
        if declared is not None:
            key = declared.key or f.name.removesuffix(declared.kind.suffix)
            found.append(Declared(f.name, key, declared))
    return tuple(found)


def is_section(value: Any) -> bool:
    """Whether a class or object is a declared settings section."""
    return dataclasses.is_dataclass(value) and bool(declarations(value))


def section_defaults(section: type) -> dict[str, Any]:
    """The section's defaults as a user writes them (the keys of a config file)."""
    return {d.key: copy.deepcopy(d.setting.default) for d in declarations(section)}


def build_section(section: type, name: str, values: Mapping[str, Any],
                  done: Mapping[str, Any]) -> Any:
    """Check and convert every key of one section, then run its `finish` hook."""
    typed = {
        d.attribute: d.setting.kind.parse(values[d.key], f"{name}.{d.key}")
        for d in declarations(section)
    }
    finish = getattr(section, "finish", None)
    if finish is not None:
        typed = finish(typed, done)
    return section(**typed)


def plain_text(value: Any) -> str:
    """A typed value as it is written in YAML: null, true, [a, b], {k: v}."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(plain_text(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {plain_text(v)}" for k, v in value.items()) + "}"
    return str(value)
