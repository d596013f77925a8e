"""The ramps metadata DB, snapshot publication and the snapshot watcher."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
import sqlalchemy

from spark_jobs.contracts.tables import RAMPS_HEADER, SNAPSHOT_HEADER
from spark_jobs.experiments.admin.metadata import (
    MetadataError,
    add_ramps,
    init_db,
    load_csv,
    ramps,
    read_ramps,
)
from spark_jobs.experiments.admin.snapshot import (
    SnapshotRow,
    SnapshotWatcher,
    latest_snapshot_path,
    prune_snapshots,
    publish_for_run,
    publish_snapshot,
    read_snapshot,
    snapshot_paths,
    write_snapshot,
)
from spark_jobs.experiments.core.periods import Period, RampRow

HOUR = 3_600_000
DAY = 24 * HOUR
HEADER = ",".join(RAMPS_HEADER)


def write_csv(path: Path, *lines: str, header: str = HEADER) -> Path:
    path.write_text("\n".join([header, *lines]) + "\n")
    return path


@pytest.fixture(scope="module")
def postgres_metadata(request) -> str:
    """One database of the session's private PostgreSQL for this module's tests."""
    from helpers.postgres import new_database

    return new_database(request.getfixturevalue("private_postgres"), "metadata")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.integration)])
def metadata_url(request, tmp_path: Path) -> str:
    """The metadata DB of one test, each kind metadata.url may name: a new SQLite file in
    nested folders, or the PostgreSQL database emptied of its `ramps` table."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/nested/dir/metadata.db"
    url = request.getfixturevalue("postgres_metadata")
    engine = sqlalchemy.create_engine(url)
    ramps.drop(engine, checkfirst=True)
    engine.dispose()
    return url


# --- metadata -------------------------------------------------------------------------------


def test_load_valid_csv_keeps_load_order(tmp_path, metadata_url):
    url = metadata_url
    csv_file = write_csv(
        tmp_path / "ramps.csv",
        "exp_a,treatment,2000,10,false",
        "exp_a,control,1000,10.5,true",
        "exp_a,treatment,2000,0,0",
        "exp_b,t,3000,100,1",
    )
    assert load_csv(url, csv_file) == 4
    assert (tmp_path / "nested/dir/metadata.db").is_file() == url.startswith("sqlite")
    assert read_ramps(url) == [
        RampRow("exp_a", "treatment", 2000, 10.0, False),
        RampRow("exp_a", "control", 1000, 10.5, True),
        RampRow("exp_a", "treatment", 2000, 0.0, False),
        RampRow("exp_b", "t", 3000, 100.0, True),
    ]
    # a second load appends after the first
    load_csv(url, write_csv(tmp_path / "more.csv", "exp_c,g,1,1,TRUE"))
    assert read_ramps(url)[-1] == RampRow("exp_c", "g", 1, 1.0, True)


@pytest.mark.parametrize(
    ("line", "field", "detail"),
    [
        ("exp,g,12.5,10,true", "ramp_ts", "not an integer"),
        ("exp,g,abc,10,true", "ramp_ts", "not an integer"),
        ("exp,g,1000,ten,true", "allocation_pct", "not a number"),
        ("exp,g,1000,100.5,true", "allocation_pct", "within [0, 100]"),
        ("exp,g,1000,-1,true", "allocation_pct", "within [0, 100]"),
        ("exp,g,1000,nan,true", "allocation_pct", "within [0, 100]"),
        ("exp,g,1000,10,yes", "is_control", "true, false, 1 or 0"),
        ("exp,g,1000,10", "is_control", "missing"),
        (",g,1000,10,true", "experiment_hash", "must not be empty"),
    ],
)
def test_invalid_row_names_file_line_and_field_and_loads_nothing(tmp_path, line, field, detail,
                                                                metadata_url):
    url = metadata_url
    csv_file = write_csv(tmp_path / "bad.csv", "exp,g,1,10,true", line, "exp,g,2,20,true")
    with pytest.raises(MetadataError) as error:
        load_csv(url, csv_file)
    message = str(error.value)
    assert message.startswith(f"{csv_file}:3: field {field}: ")
    assert detail in message
    assert read_ramps(url) == []


def test_wrong_header_and_extra_fields(tmp_path):
    url = f"sqlite:///{tmp_path}/metadata.db"  # the file is refused before any database
    wrong = write_csv(tmp_path / "h.csv", "exp,g,1,10,true", header="hash,group,ts,pct,control")
    with pytest.raises(MetadataError, match=r"h\.csv:1: header must be experiment_hash,"):
        load_csv(url, wrong)
    extra = write_csv(tmp_path / "e.csv", "exp,g,1,10,true,oops")
    with pytest.raises(MetadataError, match=r"e\.csv:2: 6 fields, expected 5"):
        load_csv(url, extra)
    with pytest.raises(MetadataError, match="cannot open"):
        load_csv(url, tmp_path / "missing.csv")


def test_read_before_init_and_add_ramps(metadata_url):
    url = metadata_url
    assert read_ramps(url) == []
    init_db(url)
    init_db(url)
    assert add_ramps(url, [RampRow("x", "g", 5, 20, False)]) == 1
    with pytest.raises(MetadataError):
        add_ramps(url, [RampRow("x", "g", 5, 120, False)])
    assert read_ramps(url) == [RampRow("x", "g", 5, 20.0, False)]


# --- snapshots ------------------------------------------------------------------------------


def test_publish_selects_periods_and_writes_the_contract_header(make_settings, metadata_url):
    settings = make_settings(experiments={"period": "1d", "window": "15m"},
                             metadata={"url": metadata_url})
    url = settings.metadata.url
    add_ramps(
        url,
        [
            RampRow("x", "control", 0, 10, True),
            RampRow("x", "treat", 0, 10, False),
            RampRow("x", "treat", 5 * HOUR, 50, False),  # inside the period: nothing
            RampRow("x", "treat", 2 * DAY, 60, False),  # a new period
            RampRow("y", "g", 2 * DAY + HOUR, 0, False),  # 0 %: not a ramp-up
        ],
    )
    path = publish_snapshot(settings, as_of_ms=2 * DAY + 2 * HOUR, lookback_ms=DAY)
    assert path.parent == Path(settings.lake.snapshots)
    lines = path.read_text().splitlines()
    assert lines == [",".join(SNAPSHOT_HEADER), f"x,treat,{2 * DAY},60.0,false"]
    assert read_snapshot(path) == [SnapshotRow("x", "treat", 2 * DAY, 60.0, False)]

    everything = publish_snapshot(settings, as_of_ms=2 * DAY + 2 * HOUR, lookback_ms=None)
    assert read_snapshot(everything) == [
        SnapshotRow("x", "control", 0, 10.0, True),
        SnapshotRow("x", "treat", 0, 10.0, False),
        SnapshotRow("x", "treat", 2 * DAY, 60.0, False),
    ]
    assert read_snapshot(everything)[0].to_period(DAY) == Period("x", "control", 0, DAY, 10, True)


def test_same_as_of_gives_identical_content_and_history_is_kept(make_settings):
    settings = make_settings()
    add_ramps(settings.metadata.url, [RampRow("x", "g", 1000, 10, False)])
    first = publish_snapshot(settings, 5000, None)
    second = publish_snapshot(settings, 5000, None)
    assert first != second
    assert first.read_bytes() == second.read_bytes()
    assert snapshot_paths(settings.lake.snapshots) == [first, second]
    assert latest_snapshot_path(settings.lake.snapshots) == second


def test_a_scheduled_run_publishes_once_and_never_rolls_back(make_settings, metadata_url):
    """The ramp_snapshot DAG: a retry adds nothing, a ramp change does, an old run skips."""
    settings = make_settings(experiments={"period": "1d", "window": "15m"},
                             metadata={"url": metadata_url})
    add_ramps(settings.metadata.url, [RampRow("x", "g", HOUR, 10, False)])
    first, published = publish_for_run(settings, 2 * HOUR)
    assert published and read_snapshot(first) == [SnapshotRow("x", "g", HOUR, 10.0, False)]
    assert publish_for_run(settings, 2 * HOUR) == (first, False)

    add_ramps(settings.metadata.url, [RampRow("y", "g", HOUR, 5, True)])
    changed, published = publish_for_run(settings, 2 * HOUR)
    assert published and changed != first and len(read_snapshot(changed)) == 2

    assert publish_for_run(settings, HOUR) == (changed, False)  # an older interval
    later, published = publish_for_run(settings, 2 * DAY)  # lookback = period: nothing left
    assert published and read_snapshot(later) == []
    assert len(snapshot_paths(settings.lake.snapshots)) == 3


def test_latest_is_the_last_published_even_for_an_older_as_of(tmp_path):
    newer = write_snapshot(tmp_path, [], as_of_ms=10_000)
    older_as_of = write_snapshot(tmp_path, [], as_of_ms=1_000)
    assert latest_snapshot_path(tmp_path) == older_as_of
    assert sorted([newer.name, older_as_of.name])[-1] == older_as_of.name


def test_missing_folder_has_no_snapshot(tmp_path):
    assert latest_snapshot_path(tmp_path / "nope") is None
    assert snapshot_paths(tmp_path / "nope") == []
    assert prune_snapshots(tmp_path / "nope", keep=1) == []


def test_readers_never_see_partial_files(tmp_path):
    big = [Period(f"exp_{i}", "treatment", i, i + 10, 12.5, i % 2 == 0) for i in range(3000)]
    folder = tmp_path / "snaps"
    stop = threading.Event()
    seen: list[int] = []
    errors: list[BaseException] = []

    def reader() -> None:
        while not stop.is_set():
            latest = latest_snapshot_path(folder)
            if latest is None:
                continue
            try:
                seen.append(len(read_snapshot(latest)))
            except BaseException as exc:  # a partial file would fail or be short
                errors.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for as_of in range(15):
            write_snapshot(folder, big, as_of)
    finally:
        stop.set()
        thread.join()
    assert errors == []
    assert seen and set(seen) == {3000}
    assert [p.name for p in folder.iterdir() if not p.name.startswith("ramp_snapshot_")] == []


def test_failed_publish_leaves_no_file(tmp_path, monkeypatch):
    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        write_snapshot(tmp_path, [Period("x", "g", 0, 1, 1, False)], 0)
    assert list(tmp_path.iterdir()) == []


def test_prune_keeps_the_newest(tmp_path):
    paths = [write_snapshot(tmp_path, [], as_of) for as_of in range(5)]
    assert prune_snapshots(tmp_path, keep=2) == paths[:3]
    assert snapshot_paths(tmp_path) == paths[3:]
    with pytest.raises(ValueError):
        prune_snapshots(tmp_path, keep=0)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_watcher_empty_then_reloads_within_refresh(tmp_path):
    clock = FakeClock()
    folder = tmp_path / "snaps"
    watcher = SnapshotWatcher(folder, refresh_ms=10_000, period_ms=100, clock=clock)
    assert len(watcher.current()) == 0
    assert not watcher.has_snapshot

    write_snapshot(folder, [Period("x", "g", 1000, 1100, 10, False)], 2000)
    clock.now = 9.999
    assert len(watcher.current()) == 0  # not yet: refresh interval not over
    clock.now = 10.0
    index = watcher.current()
    assert watcher.has_snapshot
    assert index.find("x", "g", 1099).start == 1000  # end from the reader's period_ms
    assert index.find("x", "g", 1100) is None

    same = watcher.current()
    assert same is index  # no reload when nothing changed
    clock.now = 20.0
    assert watcher.current() is index

    latest = write_snapshot(folder, [Period("y", "g", 5, 105, 10, True)], 3000)
    clock.now = 30.0
    reloaded = watcher.current()
    assert watcher.path == latest
    assert reloaded.find("x", "g", 1050) is None
    assert reloaded.find("y", "g", 5).is_control


def test_watcher_keeps_the_previous_index_on_a_bad_file(tmp_path):
    clock = FakeClock()
    write_snapshot(tmp_path, [Period("x", "g", 0, 1, 10, False)], 1)
    watcher = SnapshotWatcher(tmp_path, refresh_ms=1, period_ms=100, clock=clock)
    good = watcher.current()
    assert len(good) == 1
    (tmp_path / "ramp_snapshot_99999999999999999999_asof_000000000000001.csv").write_text("bad\n")
    clock.now = 1.0
    assert watcher.current() is good
