"""The shape of spark_jobs/ (issue 13), checked so it stays tied: no import cycle, no module
over MAX_LINES unless one reason keeps it whole, no top-level name that shadows another module.

Imports count wherever they are written, inside functions too: a deferred import moves a cycle
from import time to run time without removing it, and is how the one issue 13 found
(kafka/source.py, batch_reader.py and prefetch.py) stayed hidden.
"""

from __future__ import annotations

import ast
import functools
import graphlib
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "spark_jobs"
MAX_LINES = 400
# Modules allowed over MAX_LINES, each with the one reason that keeps it whole. An entry goes
# as soon as its module is split (test_long_module_allowlist_is_current says when).
LONG_MODULES: dict[str, str] = {}


def module_files(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package at `root`."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def imported_modules(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of `known` that module `name` imports, at any depth of its code."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    candidates: set[str] = set()
    tree = ast.parse(path.read_text(), str(path))
    typing_only = {  # `if TYPE_CHECKING:` imports never run, so they make no cycle
        id(inner) for node in ast.walk(tree)
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"
        for inner in ast.walk(node)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            candidates.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            # `from pkg import sub` imports the module pkg.sub; `from mod import name`, mod.
            candidates.update(f"{base}.{alias.name}" for alias in node.names)
            candidates.add(base)
    found = set()
    for candidate in candidates:
        while candidate and candidate not in known:
            candidate = candidate.rpartition(".")[0]
        if candidate and candidate != name:
            found.add(candidate)
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    modules = module_files(root)
    return {name: imported_modules(name, path, set(modules)) for name, path in modules.items()}


def import_cycle(root: Path) -> list[str] | None:
    """One import cycle among the package's modules (first module repeated last), or None."""
    try:
        graphlib.TopologicalSorter(import_graph(root)).prepare()
    except graphlib.CycleError as error:
        return list(error.args[1])
    return None


def test_no_import_cycle():
    cycle = import_cycle(ROOT)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or ())


def test_a_cycle_through_an_import_inside_a_function_is_found(tmp_path: Path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "face.py").write_text("def reader():\n    from pkg.reader import Reader\n")
    (package / "reader.py").write_text("from . import face\n")
    (package / "alone.py").write_text("import pkg.face\n")
    assert set(import_cycle(package) or ()) == {"pkg.face", "pkg.reader"}


def test_no_module_over_the_line_limit_unless_allowed():
    too_long = {
        path.relative_to(ROOT).as_posix(): len(path.read_text().splitlines())
        for path in module_files(ROOT).values()
    }
    too_long = {name: n for name, n in too_long.items() if n > MAX_LINES}
    unexplained = {name: n for name, n in too_long.items() if name not in LONG_MODULES}
    assert not unexplained, (
        f"modules over {MAX_LINES} lines: {unexplained}; split them by concept, or add one to "
        "LONG_MODULES with the one reason that keeps it whole"
    )


def test_long_module_allowlist_is_current():
    stale = [
        name for name in LONG_MODULES
        if not (ROOT / name).exists()
        or len((ROOT / name).read_text().splitlines()) <= MAX_LINES
    ]
    assert not stale, f"remove from LONG_MODULES (gone or no longer over {MAX_LINES}): {stale}"


@functools.cache
def _import_names() -> dict[str, list[str]]:
    """Top-level import name -> the installed distributions that provide it."""
    return packages_distributions()


@pytest.mark.parametrize(
    "name",
    sorted(
        path.stem if path.is_file() else path.name
        for path in ROOT.iterdir()
        if (path.suffix == ".py" or path.is_dir())
        and not path.name.startswith(("__", "."))
    ),
)
def test_no_top_level_name_shadows_another_module(name: str):
    """spark-submit runs spark_jobs/__main__.py with spark_jobs/ first on sys.path, so a
    top-level `settings.py` or `config/` there is what `import settings` finds, for us and for
    every library we load."""
    assert name not in sys.stdlib_module_names, f"spark_jobs/{name} shadows the standard library"
    owners = _import_names().get(name)
    assert not owners, f"spark_jobs/{name} shadows the import name of {', '.join(owners or ())}"


SYSTEMS = {"experiments", "fraud", "samples"}
# Which top-level parts of spark_jobs each part must never import (README, Architecture).
FORBIDDEN = {
    "contracts": SYSTEMS | {"streaming", "control", "results", "local", "cli", "settings"},
    "config": SYSTEMS | {"streaming", "control", "results", "local", "cli", "settings"},
    "streaming": SYSTEMS | {"control", "results", "local", "cli"},
    "control": SYSTEMS | {"results", "local", "cli"},
    "experiments": {"fraud", "samples", "results", "local", "cli"},
    "fraud": {"experiments", "samples", "results", "local", "cli"},
    "samples": {"experiments", "fraud", "results", "local", "cli"},
}
# The exceptions: the maintenance DAG's step prunes the experiments' ramp snapshots; the
# Airflow plugin serves the results dashboard behind Airflow's login.
ALLOWED = {("spark_jobs.control.maintenance", "spark_jobs.experiments.admin.snapshot"),
           ("spark_jobs.control.ui.airflow_plugin", "spark_jobs.results.dashboard.app")}


def test_imports_go_one_way():
    graph = import_graph(ROOT)
    wrong = sorted(
        (module, target) for module, targets in graph.items() for target in targets
        if (module, target) not in ALLOWED
        and target.split(".")[1] in FORBIDDEN.get(module.split(".")[1], ())
    )
    assert not wrong, f"imports against the layering of the README's Architecture: {wrong}"
