"""Spark's Python processes import the installed pyspark, not the zip of its sources that Spark
puts first on their path (no bytecode cache for a zip: each process compiled pyspark)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from spark_jobs.streaming.worker_path import PTH_LINE, PTH_NAME, install, prefer_installed


def installed_pyspark(root: Path) -> tuple[str, str, str]:
    """A site-packages with a pyspark package and the two zips it ships."""
    (root / "pyspark" / "python" / "lib").mkdir(parents=True)
    (root / "pyspark" / "__init__.py").write_text("")
    lib = root / "pyspark" / "python" / "lib"
    return str(root), str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip")


def test_the_shipped_zips_move_right_behind_the_package_that_ships_them(tmp_path: Path):
    site, spark_zip, py4j_zip = installed_pyspark(tmp_path / "site-packages")
    path = ["/job", spark_zip, py4j_zip, "/usr/lib/python311.zip", "/usr/lib/python3.11", site,
            "/after"]
    assert prefer_installed(path) == [
        "/job", "/usr/lib/python311.zip", "/usr/lib/python3.11", site, spark_zip, py4j_zip,
        "/after"]


def test_a_site_packages_reached_through_a_link_is_the_zip_s_owner(tmp_path: Path):
    """Spark names the zip by pyspark's real location; the path may hold a linked spelling
    of the same directory (a virtualenv reached through a symbolic link)."""
    _, spark_zip, py4j_zip = installed_pyspark(tmp_path / "real" / "site-packages")
    (tmp_path / "linked").symlink_to(tmp_path / "real")
    linked_site = str(tmp_path / "linked" / "site-packages")
    path = ["/job", spark_zip, py4j_zip, "/usr/lib/python3.11", linked_site, "/after"]
    assert prefer_installed(path) == [
        "/job", "/usr/lib/python3.11", linked_site, spark_zip, py4j_zip, "/after"]


def test_a_path_without_the_zips_is_unchanged(tmp_path: Path):
    site, _, _ = installed_pyspark(tmp_path / "site-packages")
    path = ["/job", "/usr/lib/python311.zip", site]
    assert prefer_installed(path) == path


def test_zips_of_a_pyspark_not_on_the_path_keep_their_place(tmp_path: Path):
    """A Spark distribution's zip (SPARK_HOME elsewhere) is the only pyspark: keep it first."""
    _, spark_zip, py4j_zip = installed_pyspark(tmp_path / "spark-home")
    site = str(tmp_path / "site-packages")
    path = [spark_zip, py4j_zip, site]
    assert prefer_installed(path) == path


def test_a_directory_without_the_package_keeps_the_zip_first(tmp_path: Path):
    """The zip's owner is on the path but holds no pyspark package (a stripped install)."""
    site, spark_zip, _ = installed_pyspark(tmp_path / "site-packages")
    (tmp_path / "site-packages" / "pyspark" / "__init__.py").unlink()
    path = [spark_zip, site]
    assert prefer_installed(path) == path


def test_other_zips_named_lib_are_left_alone(tmp_path: Path):
    site, _, _ = installed_pyspark(tmp_path / "site-packages")
    other = str(tmp_path / "site-packages" / "other" / "lib" / "thing.zip")
    path = [other, site]
    assert prefer_installed(path) == path


def test_install_writes_the_one_import_line(tmp_path: Path):
    target = Path(install(str(tmp_path)))
    assert target.name == PTH_NAME
    assert target.read_text() == PTH_LINE


def test_the_virtualenv_has_the_file_the_setup_installs():
    """`make setup` installs it (infra/setup.sh): without it every worker compiles pyspark."""
    import sysconfig

    target = Path(sysconfig.get_paths()["purelib"]) / PTH_NAME
    assert target.is_file(), f"{target} is missing: run `make setup` (infra/setup.sh) again"
    assert target.read_text() == PTH_LINE


@pytest.mark.spark
def test_a_python_worker_imports_the_installed_pyspark(spark):
    def where(_rows):
        import pyspark

        yield pyspark.__file__

    files = spark.sparkContext.parallelize([0], 1).mapPartitions(where).collect()
    assert len(files) == 1
    assert ".zip" not in files[0], files[0]
    assert files[0].endswith("pyspark/__init__.py")


def shipped_zip(root: Path, module: str) -> str:
    """A zip where pyspark ships its zips, holding one module."""
    import zipfile

    lib = root / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    archive = lib / "pyspark.zip"
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr(f"{module}.py", "VALUE = 42\n")
    return str(archive)


def without_the_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    """Import state of its own for the test, without the hook that this venv's `.pth` has
    installed already (so that `apply` must install it)."""
    import sys

    from spark_jobs.streaming.worker_path import shipped_archive_hook

    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "path_hooks",
                        [hook for hook in sys.path_hooks if hook is not shipped_archive_hook])
    monkeypatch.setattr(sys, "path_importer_cache", dict(sys.path_importer_cache))


def count_directory_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every read of a zip's directory from now on, by archive."""
    import zipimport

    reads: list[str] = []
    read = zipimport._read_directory  # type: ignore[attr-defined]

    def counted(archive: str):  # type: ignore[no-untyped-def]
        reads.append(archive)
        return read(archive)

    monkeypatch.setattr(zipimport, "_read_directory", counted)
    return reads


def test_a_shipped_zip_is_read_once_whatever_invalidates_the_caches(tmp_path: Path, monkeypatch):
    """Spark's workers invalidate the import caches as they start: a zip importer re-read
    its directory each time (0.1-0.2 s of each worker for pyspark.zip)."""
    import importlib
    import sys

    from spark_jobs.streaming.worker_path import (
        ShippedArchiveImporter,
        apply,
        shipped_archive_hook,
    )

    archive = shipped_zip(tmp_path / "site-packages", "tideline_shipped_probe")
    without_the_hook(monkeypatch)
    sys.path.append(archive)
    monkeypatch.setitem(sys.modules, "tideline_shipped_probe", None)  # restored after
    del sys.modules["tideline_shipped_probe"]
    apply()
    assert sys.path_hooks[0] is shipped_archive_hook  # ahead of the plain zip hook
    reads = count_directory_reads(monkeypatch)

    assert importlib.import_module("tideline_shipped_probe").VALUE == 42
    assert isinstance(sys.path_importer_cache[archive], ShippedArchiveImporter)
    importlib.invalidate_caches()
    importlib.invalidate_caches()
    assert reads == [archive]


@pytest.mark.skipif(sys.version_info >= (3, 13), reason="3.13 drops the listing instead")
def test_a_plain_zip_importer_re_reads_on_invalidation(tmp_path: Path, monkeypatch):
    """The cost the shipped zips' importer avoids on this Python (so the test above can
    fail)."""
    import zipimport

    archive = shipped_zip(tmp_path / "site-packages", "tideline_plain_probe")
    reads = count_directory_reads(monkeypatch)
    importer = zipimport.zipimporter(archive)
    importer.invalidate_caches()
    assert reads == [archive, archive]


@pytest.mark.parametrize(("entry", "shipped"), [
    ("/site/pyspark/python/lib/pyspark.zip", True),
    ("/site/pyspark/python/lib/pyspark.zip/pyspark/sql", True),  # a package inside it
    ("/site/pyspark/jars/spark-core_2.13-4.3.0.jar", True),  # Spark puts it on the path
    ("/site/pyspark/jars/spark-core_2.13-4.3.0.jar/org", True),
    ("/site/other/lib/thing.zip", False),
    ("/site/other/jars/thing.jar", False),
    ("/usr/lib/python311.zip", False),
    ("/site", False),
])
def test_which_entries_are_archives_pyspark_ships(entry: str, shipped: bool):
    from spark_jobs.streaming.worker_path import is_shipped_archive

    assert is_shipped_archive(entry) is shipped


def test_other_zips_get_the_usual_importer(tmp_path: Path):
    from spark_jobs.streaming.worker_path import shipped_archive_hook

    with pytest.raises(ImportError):
        shipped_archive_hook(str(tmp_path / "elsewhere" / "lib" / "thing.zip"))


def test_importers_made_before_the_hook_are_replaced_without_a_read(tmp_path: Path,
                                                                     monkeypatch):
    """The .pth files read before Tideline's import modules through the zips that are first
    on the path, so their plain importers exist when `apply` runs."""
    import importlib
    import sys
    import zipimport

    from spark_jobs.streaming.worker_path import ShippedArchiveImporter, apply

    archive = shipped_zip(tmp_path / "site-packages", "tideline_early_probe")
    without_the_hook(monkeypatch)
    sys.path_importer_cache[archive] = zipimport.zipimporter(archive)
    reads = count_directory_reads(monkeypatch)
    apply()
    importlib.invalidate_caches()
    assert isinstance(sys.path_importer_cache[archive], ShippedArchiveImporter)
    assert reads == []

