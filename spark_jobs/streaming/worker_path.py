"""Spark's Python processes import pyspark from the installed package, whose bytecode is cached.

Why: Spark puts its own zip of pyspark's sources (`<pyspark>/python/lib/pyspark.zip`, and
py4j's) first on the PYTHONPATH of every Python process it starts: the workers, the data
source planners, the streaming source runner. Python cannot cache bytecode for modules in a
zip, so each of those processes compiled pyspark's modules from source at start, ~0.65 s of
CPU each (BENCHMARKS.md, "Python workers compiled pyspark"), paid at every query start and by
every new worker. The zip holds the same files as the installed package it ships in, so
putting it after the package's directory on sys.path changes which copy is imported, not
what is imported.

The archives pyspark ships are also read once per process, not at every start of a worker:
Spark's workers call `importlib.invalidate_caches()` as they start (`setup_spark_files`), and
a zip's importer then re-reads the archive's whole directory, in Python: pyspark.zip's ~1,400
entries, and spark-core's jar, which Spark also puts on their PYTHONPATH, twice (the jar and
its `org` directory). That was 0.1-0.2 s of CPU in each new worker and planner process
(py-spy, BENCHMARKS.md, twenty-third session). Those archives do not change while a process
runs, so their importer (`ShippedArchiveImporter`, installed as a path hook) keeps the
directory it read.

`infra/setup.sh` installs a `.pth` file into the virtualenv (`install()`), so every interpreter
start applies this: the processes Spark starts then import pyspark as the driver does.
"""

from __future__ import annotations

import os
import sys
import zipimport
from collections.abc import Sequence

PTH_NAME = "tideline_worker_path.pth"
PTH_LINE = "import spark_jobs.streaming.worker_path as _tideline; _tideline.apply()\n"


def _shipped_zip_owner(entry: str) -> str | None:
    """The directory holding the pyspark package that ships this zip, or None if the entry
    is not a zip inside an installed pyspark (`<dir>/pyspark/python/lib/*.zip`)."""
    lib = os.path.dirname(entry)
    if not entry.endswith(".zip") or os.path.basename(lib) != "lib":
        return None
    package = os.path.dirname(os.path.dirname(lib))
    if os.path.basename(package) != "pyspark" or os.path.basename(os.path.dirname(lib)) != "python":
        return None
    return os.path.dirname(package)


def prefer_installed(path: Sequence[str]) -> list[str]:
    """`path` with the zips an installed pyspark ships moved behind the directory that holds
    that pyspark (so the installed copy, with its bytecode, is found first). Zips of a pyspark
    whose directory is not on the path, and everything else, keep their places.

    The directory is matched by its real path: Spark names the zip by pyspark's real location,
    while a virtualenv reached through a symbolic link (a link to a release directory, a
    checkout sharing another's environment) puts its linked spelling on the path. Matched by
    spelling, every Python worker of such an environment compiled pyspark from the zip."""
    entries = list(path)
    spelled = {}  # real directory -> its first spelling on the path
    for entry in entries:
        if entry.endswith(".zip") or not entry:
            continue
        spelled.setdefault(os.path.realpath(entry), entry)

    def owner_on_path(entry: str) -> str | None:
        owner = _shipped_zip_owner(entry)
        if owner is None or not os.path.isfile(os.path.join(owner, "pyspark", "__init__.py")):
            return None
        return spelled.get(os.path.realpath(owner))

    owners = {entry: owner for entry in entries if (owner := owner_on_path(entry)) is not None}
    if not owners:
        return entries
    kept = [entry for entry in entries if entry not in owners]
    last_owner = max(kept.index(owner) for owner in owners.values())
    return kept[:last_owner + 1] + list(owners) + kept[last_owner + 1:]


def is_shipped_archive(entry: str) -> bool:
    """Whether a path entry is, or lies inside, a zip or jar of an installed pyspark
    (`<dir>/pyspark/python/lib/*.zip`, `<dir>/pyspark/jars/*.jar`)."""
    archive = entry
    for suffix in (".zip", ".jar"):
        inside = entry.find(suffix + os.sep)
        if inside != -1:
            archive = entry[:inside + len(suffix)]
            break
    if archive.endswith(".zip"):
        return _shipped_zip_owner(archive) is not None
    jars = os.path.dirname(archive)
    return (archive.endswith(".jar") and os.path.basename(jars) == "jars"
            and os.path.basename(os.path.dirname(jars)) == "pyspark")


class ShippedArchiveImporter(zipimport.zipimporter):
    """An archive that pyspark ships, read once: invalidating caches keeps its directory."""

    def invalidate_caches(self) -> None:
        pass


def shipped_archive_hook(entry: str) -> ShippedArchiveImporter:
    """The path hook giving a shipped archive its importer (ImportError: not ours, the next
    hook decides)."""
    if not isinstance(entry, str) or not is_shipped_archive(entry):
        raise ImportError(f"not an archive shipped by pyspark: {entry}")
    return ShippedArchiveImporter(entry)


def apply() -> None:
    """Reorder this interpreter's sys.path and hook the shipped archives' importer (what the
    `.pth` line runs at start)."""
    sys.path[:] = prefer_installed(sys.path)
    if shipped_archive_hook not in sys.path_hooks:
        sys.path_hooks.insert(0, shipped_archive_hook)
    # imports of the .pth files read before this one made plain importers of the archives
    # first on the path; their directory is cached by archive, so replacing is cheap
    for entry, finder in list(sys.path_importer_cache.items()):
        if type(finder) is zipimport.zipimporter and is_shipped_archive(entry):
            try:
                sys.path_importer_cache[entry] = ShippedArchiveImporter(entry)
            except ImportError:  # gone since: the plain importer stays, nothing breaks
                continue


def install(site_packages: str | None = None) -> str:
    """Write the `.pth` file into the environment's site-packages; returns its path."""
    import sysconfig  # only at set-up: every interpreter start imports this module

    directory = site_packages or sysconfig.get_paths()["purelib"]
    target = os.path.join(directory, PTH_NAME)
    with open(target, "w", encoding="utf-8") as out:
        out.write(PTH_LINE)
    return target
