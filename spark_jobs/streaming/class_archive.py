"""A class-data-sharing archive of the classes the driver JVM loads, so each run starts faster.

Every `tideline` run starts a JVM that loads and verifies thousands of Spark classes before
the session exists and again for its first query; a JDK dynamic CDS archive holds them
already parsed and verified. The first run without an archive writes one when its JVM exits
(to a file of its own, renamed into place once the JVM is gone: two runs writing at once
cannot corrupt it); later runs map it. An archive the JVM finds unusable (another JDK,
another class path) is ignored by the JVM, which then loads classes as usual.

Only a JVM that PySpark launches itself gets the options (not one that spark-submit started);
`TIDELINE_NO_CLASS_ARCHIVE=1` turns the archive off.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import shutil
import sys
from pathlib import Path
from typing import Any

OFF_VARIABLE = "TIDELINE_NO_CLASS_ARCHIVE"
EXIT_WAIT_S = 120.0  # the JVM writes the archive (a few seconds) before it exits
# the JVM's notes about an archive it cannot use go to stdout, which a command's output owns
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off -Xlog:class+path=off"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tideline"


def archive_path() -> Path:
    """One archive per Spark version and JDK: an archive only maps into the JVM that wrote it."""
    import pyspark

    java_home = os.environ.get("JAVA_HOME") or ""
    java = shutil.which("java", path=str(Path(java_home) / "bin")) if java_home else None
    java = os.path.realpath(java or shutil.which("java") or "java")
    key = hashlib.sha256(f"{pyspark.__version__}|{java}|{sys.prefix}".encode()).hexdigest()
    return cache_dir() / f"spark-{pyspark.__version__}-{key[:12]}.jsa"


def launches_jvm() -> bool:
    """True when building the session starts a JVM (not spark-submit's, not one running)."""
    from pyspark import SparkContext

    return "PYSPARK_GATEWAY_PORT" not in os.environ and SparkContext._gateway is None


def remove_abandoned(path: Path) -> None:
    """Archives being written by processes that died before their JVM finished (killed)."""
    for pending in path.parent.glob(f"{path.name}.*.tmp"):
        pid = pending.suffixes[-2].lstrip(".") if len(pending.suffixes) >= 2 else ""
        if pid.isdigit() and not _alive(int(pid)):
            pending.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def java_options(path: Path, pending: Path) -> str:
    """Map the archive when it exists, else have the JVM write one at `pending` on exit."""
    if path.is_file():
        return f"-XX:SharedArchiveFile={path} {QUIET}"
    return f"-XX:ArchiveClassesAtExit={pending} {QUIET}"


def driver_options(configured: str | None) -> str | None:
    """spark.driver.extraJavaOptions with the archive's options added, or None to leave the
    setting alone (archive off, no JVM launched here, or options that already choose one)."""
    if os.environ.get(OFF_VARIABLE, "").strip().lower() in ("1", "true", "yes"):
        return None
    if not launches_jvm() or (configured and "Archive" in configured):
        return None
    path = archive_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    if not os.access(path.parent, os.W_OK):
        return None
    pending = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    options = java_options(path, pending)
    if not path.is_file():
        remove_abandoned(path)
        atexit.register(publish_on_exit, pending, path)
    return f"{configured} {options}" if configured else options


def publish_on_exit(pending: Path, path: Path, gateway: Any = None) -> None:
    """At interpreter exit: end the JVM (it writes the archive as it exits), then move the
    archive into place. Closing the JVM's stdin is how PySpark's JVM learns its Python is gone."""
    if gateway is None:
        from pyspark import SparkContext

        gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if proc is None:
        return
    # Not gateway.shutdown(): it closes the callback server's connections, and closing one
    # while its thread reads from it (a foreachBatch sink or a query listener was in use)
    # blocks for good. The JVM ending closes them.
    with contextlib.suppress(Exception):
        proc.stdin.close()
    try:
        proc.wait(timeout=EXIT_WAIT_S)
    except Exception:
        pending.unlink(missing_ok=True)
        return
    if proc.returncode == 0 and pending.is_file() and pending.stat().st_size > 0:
        os.replace(pending, path)
    else:
        pending.unlink(missing_ok=True)
