"""Ramp snapshots: CSV files of the current periods that streaming jobs re-read while running.

Publishing writes a temp file in the snapshot folder, fsyncs it and renames it into place,
so a reader only ever sees whole files. Files are never rewritten: each publication adds
`ramp_snapshot_<publish time ns, 20 digits>_asof_<as_of ms, 15 digits>.csv`, and the
lexicographically greatest name is the latest snapshot (no pointer file that could
disagree with the folder). Publication times are forced strictly increasing within a
folder, so "latest" means "last published" even when the clock steps back or an operator
re-publishes an older as_of.

A snapshot never goes silently empty (CONTRACTS.md section 9): publishing reads a metadata DB
that must exist and hold `ramps`, and refuses a snapshot without periods when the previous
one has periods that the new one's lookback still covers.
"""

from __future__ import annotations

import csv
import io
import logging
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from spark_jobs.contracts.tables import SNAPSHOT_HEADER
from spark_jobs.experiments.admin.metadata import read_ramps
from spark_jobs.experiments.core.periods import Period, PeriodIndex, periods, snapshot_periods
from spark_jobs.settings import Settings

log = logging.getLogger(__name__)

PREFIX = "ramp_snapshot_"
_NAME = re.compile(r"^ramp_snapshot_(\d{20})_asof_(-?\d+)\.csv$")
_TEMP_PREFIX = ".tmp_ramp_snapshot_"
_STALE_TEMP_S = 3600


class SnapshotError(ValueError):
    """A snapshot file that cannot be read; the message names the file and line."""


class EmptySnapshotRefused(RuntimeError):
    """The new snapshot has no periods while the previous one has periods still inside the
    lookback: the metadata DB lost its ramps, or metadata.url names another DB."""


@dataclass(frozen=True)
class SnapshotRow:
    """One line of a snapshot file; the period end is start + the configured period."""

    experiment_hash: str
    experiment_group: str
    group_ramp_time: int
    allocation_pct: float
    is_control: bool

    def to_period(self, period_ms: int) -> Period:
        return Period(
            experiment_hash=self.experiment_hash,
            experiment_group=self.experiment_group,
            start=self.group_ramp_time,
            end=self.group_ramp_time + period_ms,
            allocation_pct=self.allocation_pct,
            is_control=self.is_control,
        )


def _folder(folder: str | Path) -> Path:
    text = str(folder)
    return Path(text[len("file://") :] if text.startswith("file://") else text)


def snapshot_paths(folder: str | Path) -> list[Path]:
    """Published snapshots of a folder, oldest first; temp files are never listed."""
    root = _folder(folder)
    try:
        names = [entry.name for entry in os.scandir(root) if _NAME.match(entry.name)]
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [root / name for name in sorted(names)]


def latest_snapshot_path(folder: str | Path) -> Path | None:
    """The last published snapshot, or None when there is none (or no folder)."""
    paths = snapshot_paths(folder)
    return paths[-1] if paths else None


def render_snapshot(items: Iterable[Period]) -> str:
    """The CSV text of periods; deterministic so the same input gives the same bytes."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(SNAPSHOT_HEADER)
    for p in items:
        flag = "true" if p.is_control else "false"
        writer.writerow(
            [p.experiment_hash, p.experiment_group, p.start, repr(p.allocation_pct), flag]
        )
    return out.getvalue()


def _fsync_dir(root: Path) -> None:
    try:
        fd = os.open(root, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_snapshot(folder: str | Path, items: Iterable[Period], as_of_ms: int) -> Path:
    """Atomically add a snapshot file with these periods; earlier files are kept."""
    root = _folder(folder)
    root.mkdir(parents=True, exist_ok=True)
    data = render_snapshot(items).encode("utf-8")
    fd, temp = tempfile.mkstemp(prefix=_TEMP_PREFIX, suffix=".part", dir=root)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        latest = latest_snapshot_path(root)
        stamp = time.time_ns()
        if latest is not None:
            match = _NAME.match(latest.name)
            assert match is not None
            stamp = max(stamp, int(match.group(1)) + 1)
        target = root / f"{PREFIX}{stamp:020d}_asof_{as_of_ms:015d}.csv"
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    _fsync_dir(root)
    return target


def current_periods(settings: Settings, as_of_ms: int, lookback_ms: int | None) -> list[Period]:
    """The periods of the metadata DB that a snapshot as of `as_of_ms` holds; the DB must
    exist and have its `ramps` table (MetadataUnavailable otherwise)."""
    rows = read_ramps(settings.metadata.url, must_exist=True)
    return snapshot_periods(periods(rows, settings.experiments.period_ms), as_of_ms, lookback_ms)


def check_not_silently_empty(chosen: list[Period], previous: Path | None, as_of_ms: int,
                             lookback_ms: int | None) -> None:
    """EmptySnapshotRefused when `chosen` is empty but the previous snapshot has periods
    whose ramp-up lies in the new snapshot's (as_of - lookback, as_of]."""
    if chosen or previous is None:
        return
    try:
        rows = read_snapshot(previous)
    except (OSError, SnapshotError):
        return  # an unreadable previous snapshot says nothing about the ramps
    lower = None if lookback_ms is None else as_of_ms - lookback_ms
    kept = [r for r in rows
            if r.group_ramp_time <= as_of_ms and (lower is None or r.group_ramp_time > lower)]
    if kept:
        raise EmptySnapshotRefused(
            f"refusing to publish an empty ramp snapshot: the metadata DB has no period as of "
            f"{as_of_ms} ms, but the previous snapshot {previous.name} has {len(kept)} period(s) "
            "that are still inside the lookback; check metadata.url and the ramps table"
        )


def publish_snapshot(settings: Settings, as_of_ms: int, lookback_ms: int | None) -> Path:
    """Publish the periods whose ramp-up lies within lookback before as_of (None: all).

    The CLI passes lookback = experiments.period by default (CONTRACTS.md section 3).
    """
    chosen = current_periods(settings, as_of_ms, lookback_ms)
    check_not_silently_empty(
        chosen, latest_snapshot_path(settings.lake.snapshots), as_of_ms, lookback_ms
    )
    path = write_snapshot(settings.lake.snapshots, chosen, as_of_ms)
    log.info("published %d periods as of %d to %s", len(chosen), as_of_ms, path)
    return path


def _parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1"):
        return True
    if value in ("false", "0"):
        return False
    raise ValueError(f"must be true or false, got {text!r}")


def read_snapshot(path: str | Path) -> list[SnapshotRow]:
    """Rows of one snapshot file in file order; SnapshotError on a malformed file."""
    file = Path(path)
    with file.open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None or tuple(header) != SNAPSHOT_HEADER:
            raise SnapshotError(f"{file}:1: header must be {','.join(SNAPSHOT_HEADER)}")
        rows = []
        for record in reader:
            if not record:
                continue
            try:
                if len(record) != len(SNAPSHOT_HEADER):
                    raise ValueError(f"{len(record)} fields, expected {len(SNAPSHOT_HEADER)}")
                rows.append(
                    SnapshotRow(
                        experiment_hash=record[0],
                        experiment_group=record[1],
                        group_ramp_time=int(record[2]),
                        allocation_pct=float(record[3]),
                        is_control=_parse_bool(record[4]),
                    )
                )
            except ValueError as exc:
                raise SnapshotError(f"{file}:{reader.line_num}: {exc}") from None
    return rows


def snapshot_index(rows: Iterable[SnapshotRow], period_ms: int) -> PeriodIndex:
    """The period index of snapshot rows, ends computed with the reader's period."""
    return PeriodIndex(row.to_period(period_ms) for row in rows)


class SnapshotWatcher:
    """The period index of the latest snapshot, refreshed at most every `refresh_ms`.

    A refresh lists the folder and reloads only when the newest file name changed. No
    snapshot (or no folder) yet gives an empty index with `has_snapshot` False. If the
    newest file cannot be read, the previous index stays and the next refresh retries.
    """

    def __init__(
        self,
        folder: str | Path,
        refresh_ms: int,
        period_ms: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.folder = _folder(folder)
        self.refresh_ms = refresh_ms
        self.period_ms = period_ms
        self._clock = clock
        self._checked_at: float | None = None
        self._path: Path | None = None
        self._index = PeriodIndex()

    @property
    def has_snapshot(self) -> bool:
        return self._path is not None

    @property
    def path(self) -> Path | None:
        """The snapshot file the current index was loaded from."""
        return self._path

    def refresh(self) -> bool:
        """Check the folder now; True when a new snapshot was loaded."""
        self._checked_at = self._clock()
        newest = latest_snapshot_path(self.folder)
        if newest is None or newest == self._path:
            return False
        try:
            index = snapshot_index(read_snapshot(newest), self.period_ms)
        except (OSError, SnapshotError) as exc:
            log.warning("keeping the previous ramp snapshot: %s", exc)
            return False
        self._index, self._path = index, newest
        log.info("loaded ramp snapshot %s (%d periods)", newest.name, len(index))
        return True

    def current(self) -> PeriodIndex:
        """The index to use now; checks the folder when refresh_ms has passed."""
        now = self._clock()
        if self._checked_at is None or (now - self._checked_at) * 1000 >= self.refresh_ms:
            self.refresh()
        return self._index


def prune_snapshots(folder: str | Path, keep: int) -> list[Path]:
    """Delete all but the `keep` newest snapshots (and stale temp files); returns deleted."""
    if keep < 1:
        raise ValueError("keep must be at least 1: the latest snapshot is in use")
    root = _folder(folder)
    removed = []
    for path in snapshot_paths(root)[:-keep]:
        path.unlink(missing_ok=True)
        removed.append(path)
    if root.is_dir():
        cutoff = time.time() - _STALE_TEMP_S
        for temp in root.glob(f"{_TEMP_PREFIX}*"):
            try:
                if temp.stat().st_mtime < cutoff:
                    temp.unlink()
                    removed.append(temp)
            except FileNotFoundError:
                continue
    return removed


def snapshot_published_ms(path: Path) -> int:
    """When a snapshot was published (ms), from its file name."""
    match = _NAME.match(path.name)
    if match is None:
        raise SnapshotError(f"{path.name} is not a snapshot file name")
    return int(match.group(1)) // 1_000_000


def snapshot_as_of(path: Path) -> int:
    """The as_of (ms) encoded in a snapshot file name."""
    match = _NAME.match(path.name)
    if match is None:
        raise SnapshotError(f"{path.name} is not a snapshot file name")
    return int(match.group(2))


def publish_for_run(settings: Settings, as_of_ms: int) -> tuple[Path, bool]:
    """Publish the snapshot of one scheduled run; (path, published) with False for a no-op.

    Idempotent per run: a retry finds its own snapshot (same as_of, same bytes) and adds
    nothing. A run for an older interval than the latest snapshot (a backfill or a late
    re-run) publishes nothing either, since jobs always read the newest file and must not
    be rolled back to an older view of the ramps.
    """
    latest = latest_snapshot_path(settings.lake.snapshots)
    chosen = current_periods(settings, as_of_ms, settings.experiments.period_ms)
    if latest is not None:
        latest_as_of = snapshot_as_of(latest)
        if latest_as_of > as_of_ms:
            log.info("snapshot as of %d skipped: %s is newer", as_of_ms, latest.name)
            return latest, False
        if latest_as_of == as_of_ms and latest.read_text() == render_snapshot(chosen):
            return latest, False
    check_not_silently_empty(chosen, latest, as_of_ms, settings.experiments.period_ms)
    return write_snapshot(settings.lake.snapshots, chosen, as_of_ms), True
