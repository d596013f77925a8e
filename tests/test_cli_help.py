"""Every `tideline` command says what it does, how to call it and which config keys it reads.

The walk covers every parser `build_parser()` builds, so a command added later without a
description, an example or its keys fails here; an example must parse as the command it
documents, and every key it names must be a declared setting.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Iterator
from importlib.metadata import version

import pytest

from spark_jobs.cli import build_parser, main
from spark_jobs.config.cli_args import OneLineParser
from spark_jobs.config.cli_help import EVERY_SECTION
from spark_jobs.settings import DEFAULTS


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
             ) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser, bool]]:
    """(words after `tideline`, parser, whether it runs something) of every command below
    `parser`, depth first."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                runs = not any(isinstance(a, argparse._SubParsersAction) for a in child._actions)
                yield (*path, name), child, runs
                yield from commands(child, (*path, name))


def unknown_key(key: str) -> bool:
    if key == EVERY_SECTION:
        return False
    section, _, name = key.partition(".")
    return section not in DEFAULTS or (name != "*" and name not in DEFAULTS[section])


def problems(root: argparse.ArgumentParser) -> list[str]:
    """What each command lacks: a description, an example that parses as itself, and (when
    it runs something) the config keys it reads, each a declared one."""
    found = []
    for path, parser, runs in commands(root):
        where = " ".join(path)
        if not (parser.description or "").strip():
            found.append(f"{where}: no description")
        examples = getattr(parser, "examples", ())
        if not examples:
            found.append(f"{where}: no example")
        for example in examples:
            words = shlex.split(example)
            if words[0] != root.prog or tuple(words[1:len(path) + 1]) != path:
                found.append(f"{where}: example {example!r} is not `{root.prog} {where} ...`")
                continue
            try:
                root.parse_args(words[1:])
            except SystemExit:
                found.append(f"{where}: example {example!r} does not parse")
        reads = getattr(parser, "reads", ())
        if runs and not reads:
            found.append(f"{where}: no config keys (reads=)")
        found.extend(f"{where}: reads unknown key {key!r}" for key in reads if unknown_key(key))
    return found


def test_every_command_has_a_description_an_example_and_its_config_keys() -> None:
    parser = build_parser()
    assert len(list(commands(parser))) >= 25  # the walk reaches the nested actions
    assert problems(parser) == []


def test_a_command_without_them_is_found(capsys: pytest.CaptureFixture[str]) -> None:
    root = OneLineParser(prog="tideline")
    group = root.add_subparsers().add_parser(
        "thing", description="A thing.", examples=("tideline thing go",))
    actions = group.add_subparsers()
    actions.add_parser("go", description="Go.", examples=("tideline thing go --fast",),
                       reads=("kafka.bootstrap", "kafka.nothing", "nosection.*", "lake.*"))
    actions.add_parser("bare")
    assert problems(root) == [
        "thing go: example 'tideline thing go --fast' does not parse",
        "thing go: reads unknown key 'kafka.nothing'",
        "thing go: reads unknown key 'nosection.*'",
        "thing bare: no description",
        "thing bare: no example",
        "thing bare: no config keys (reads=)",
    ]
    capsys.readouterr()  # argparse's own complaint about the bad example


def test_help_shows_examples_and_keys_kept_on_their_own_lines() -> None:
    recompute = dict((path, p) for path, p, _ in commands(build_parser()))[("recompute",)]
    text = recompute.format_help()
    assert "examples:\n  tideline recompute --date 2026-01-01\n" in text
    assert "reads: spark.*, lake.root," in text
    platform = dict((path, p) for path, p, _ in commands(build_parser()))[("platform",)]
    assert "reads: every section" in platform.format_help()


def test_top_level_help_names_the_configuration_variables(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # as wrapped for any terminal width
    for name in ("TIDELINE_CONFIG", "TIDELINE_<SECTION>__<KEY>", "TIDELINE_DEBUG",
                 "tideline config show"):
        assert name in text


def test_version_names_tideline_pyspark_and_python(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"tideline {version('tideline')} (PySpark {version('pyspark')}, ")
    assert "Python 3." in line
