"""Where settings come from: defaults < YAML file ($TIDELINE_CONFIG) < environment
TIDELINE_<SECTION>__<KEY> (values parsed as YAML) < overrides given in code.

Maps merge key by key across the layers (kafka.client from a file and a secret from the
environment combine), and each `section.key` remembers which layers gave it, for
`tideline config show`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from spark_jobs.config.fields import ConfigError

ENV_PREFIX = "TIDELINE_"
CONFIG_VARIABLE = "TIDELINE_CONFIG"
DEFAULT = "default"
OVERRIDE = "override"

Sources = dict[str, tuple[str, ...]]  # "section.key" -> the layers that gave it, in order


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Maps merge key by key; any other value in `override` replaces the base value."""
    merged = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


@dataclass(frozen=True)
class Layer:
    """A partial tree of settings and, per `section.key` it sets, the names of its source."""

    tree: dict[str, Any]
    labels: Sources = field(default_factory=dict)

    @classmethod
    def named(cls, tree: Mapping[str, Any], label: str) -> Layer:
        """Every key of `tree` from one source (the defaults, a file, the overrides)."""
        labels = {
            f"{section}.{key}": (label,)
            for section, values in tree.items() if isinstance(values, Mapping)
            for key in values
        }
        return cls(dict(tree), labels)


def env_layer(environ: Mapping[str, str]) -> Layer:
    """TIDELINE_<SECTION>__<KEY>[__<NESTED>...] variables, values parsed as YAML."""
    tree: dict[str, Any] = {}
    labels: Sources = {}
    # Shallow names first, so TIDELINE_A__B__C refines TIDELINE_A__B whatever the env order.
    for name, text in sorted(environ.items(), key=lambda item: item[0].count("__")):
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        path = [part.lower() for part in name[len(ENV_PREFIX) :].split("__")]
        try:
            value = yaml.safe_load(text) if text != "" else ""
        except yaml.YAMLError as exc:
            raise ConfigError(f"{name}: not valid YAML ({yaml_problem(exc)})") from exc
        except ValueError:  # YAML's form of a value it cannot build (2026-13-01): the text
            value = text
        node = tree
        for depth, part in enumerate(path[:-1], start=1):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                parent = ENV_PREFIX + "__".join(path[:depth]).upper()
                raise ConfigError(f"{name}: {parent} is set to a value that is not a map")
        node[path[-1]] = value
        setting = ".".join(path[:2])
        labels[setting] = (*labels.get(setting, ()), name) if len(path) > 2 else (name,)
    return Layer(tree, labels)


def file_layer(path: str | None) -> Layer:
    """The YAML file named by TIDELINE_CONFIG (none: an empty layer)."""
    if not path:
        return Layer({})
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"{CONFIG_VARIABLE} names {path!r}, which is not a file")
    try:
        loaded = yaml.safe_load(file.read_text()) or {}
    except OSError as exc:
        raise ConfigError(f"{CONFIG_VARIABLE} names {path!r}, which cannot be read "
                          f"({exc.strerror or exc})") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason})") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {yaml_problem(exc)}") from exc
    except ValueError as exc:  # a value YAML reads but cannot build, like 2026-13-01
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(loaded, Mapping):
        raise ConfigError(f"{path}: the top level must be a map of sections")
    return Layer.named(loaded, path)


def yaml_problem(exc: yaml.YAMLError) -> str:
    """What is wrong and where (line, column), on one line."""
    problem = getattr(exc, "problem", None) or exc.__class__.__name__
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{problem}{where}"


def merge_layers(layers: Sequence[Layer]) -> tuple[dict[str, Any], Sources]:
    """The merged tree and, per key, its sources: the last layer that set it, or every layer
    that added keys to a map."""
    tree: dict[str, Any] = {}
    sources: Sources = {}
    for layer in layers:
        for name, labels in layer.labels.items():
            section, key = name.split(".", 1)
            before = tree.get(section)
            before = before.get(key) if isinstance(before, Mapping) else None
            value = layer.tree[section][key]
            adds = isinstance(value, Mapping) and isinstance(before, Mapping) and bool(before)
            sources[name] = (*sources.get(name, ()), *labels) if adds else labels
        tree = deep_merge(tree, layer.tree)
    return tree, sources


def read_layers(defaults: Mapping[str, Any], environ: Mapping[str, str],
                overrides: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], Sources]:
    """Defaults, then the YAML file named by TIDELINE_CONFIG, then environment, then overrides."""
    layers = [
        Layer.named(defaults, DEFAULT),
        file_layer(environ.get(CONFIG_VARIABLE)),
        env_layer(environ),
    ]
    if overrides:
        layers.append(Layer.named(overrides, OVERRIDE))
    return merge_layers(layers)


def check_known(tree: Mapping[str, Any], defaults: Mapping[str, Mapping[str, Any]]) -> None:
    """Every section and key of `tree` is declared (a typo fails instead of being ignored)."""
    for section, values in tree.items():
        if section not in defaults:
            raise ConfigError(
                f"unknown config section {section!r} (known: {', '.join(sorted(defaults))})"
            )
        if not isinstance(values, Mapping):
            raise ConfigError(f"config section {section!r} must be a map")
        for key in values:
            if key not in defaults[section]:
                known = ", ".join(sorted(defaults[section]))
                raise ConfigError(f"unknown setting {section}.{key} (known: {known})")
