"""The driver JVM's class-data-sharing archive: mapped when present, written once when not
(to a file of the writer's own, moved into place only when its JVM exited cleanly), off on
request, and never chosen over options that name an archive already."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from spark_jobs.streaming.class_archive import (
    OFF_VARIABLE,
    archive_path,
    driver_options,
    java_options,
    publish_on_exit,
    remove_abandoned,
)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(OFF_VARIABLE, raising=False)
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    # as in a fresh `tideline` process: no JVM launched yet (the suite's session may be up),
    # and no exit hook left behind in the test process
    from pyspark import SparkContext

    monkeypatch.setattr(SparkContext, "_gateway", None)
    monkeypatch.setattr("spark_jobs.streaming.class_archive.atexit.register",
                        lambda *args: None)
    return tmp_path / "tideline"


def test_an_existing_archive_is_mapped_else_the_jvm_writes_one_on_exit(tmp_path: Path):
    path, pending = tmp_path / "a.jsa", tmp_path / "a.jsa.1.tmp"
    assert f"-XX:ArchiveClassesAtExit={pending}" in java_options(path, pending)
    path.write_bytes(b"archive")
    mapped = java_options(path, pending)
    assert f"-XX:SharedArchiveFile={path}" in mapped
    assert "ArchiveClassesAtExit" not in mapped


def test_the_options_join_those_configured(cache: Path):
    options = driver_options("-Dsome.flag=1")
    assert options is not None
    assert options.startswith("-Dsome.flag=1 -XX:ArchiveClassesAtExit=")
    assert str(archive_path().parent) == str(cache)
    archive_path().write_bytes(b"archive")
    assert driver_options(None) == java_options(archive_path(), Path("unused"))


def test_off_on_request_or_when_an_archive_is_configured(cache: Path,
                                                          monkeypatch: pytest.MonkeyPatch):
    assert driver_options("-XX:SharedArchiveFile=/elsewhere.jsa") is None
    monkeypatch.setenv(OFF_VARIABLE, "1")
    assert driver_options(None) is None


def test_no_options_for_a_jvm_this_process_does_not_launch(cache: Path,
                                                          monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "12345")  # inside spark-submit
    assert driver_options(None) is None


def test_archives_abandoned_by_dead_writers_are_removed(tmp_path: Path):
    path = tmp_path / "a.jsa"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    abandoned = tmp_path / f"a.jsa.{dead}.tmp"
    writing = tmp_path / f"a.jsa.{os.getpid()}.tmp"
    abandoned.write_bytes(b"half")
    writing.write_bytes(b"half")
    remove_abandoned(path)
    assert not abandoned.exists()
    assert writing.exists()


class _Gateway:
    """What publish_on_exit uses of py4j's gateway: the launched process (never shutdown(),
    which blocks when a callback connection's thread is reading)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc

    def shutdown(self) -> None:
        raise AssertionError("publish_on_exit must not shut the gateway down")


def _writer(pending: Path, exit_code: int) -> subprocess.Popen:
    """A process that, like the JVM, writes the archive once its stdin closes, then exits."""
    code = (f"import sys; sys.stdin.read(); open({str(pending)!r}, 'wb').write(b'classes'); "
            f"sys.exit({exit_code})")
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE)


def test_the_archive_moves_into_place_once_its_writer_exited_cleanly(tmp_path: Path):
    path, pending = tmp_path / "a.jsa", tmp_path / "a.jsa.7.tmp"
    publish_on_exit(pending, path, _Gateway(_writer(pending, 0)))
    assert path.read_bytes() == b"classes"
    assert not pending.exists()


def test_the_archive_of_a_failed_exit_is_dropped(tmp_path: Path):
    path, pending = tmp_path / "a.jsa", tmp_path / "a.jsa.7.tmp"
    publish_on_exit(pending, path, _Gateway(_writer(pending, 1)))
    assert not path.exists()
    assert not pending.exists()


def test_nothing_to_publish_without_a_launched_jvm(tmp_path: Path):
    class NoProcess:
        proc = None

    publish_on_exit(tmp_path / "p.tmp", tmp_path / "a.jsa", NoProcess())
    assert list(tmp_path.iterdir()) == []
