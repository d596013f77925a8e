"""Snapshots never go silently empty (CONTRACTS.md section 9): publication refuses a missing
metadata DB, one without `ramps`, and an empty snapshot replacing current periods; a job
using a stale snapshot alerts once per snapshot."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from spark_jobs.experiments.admin.metadata import MetadataUnavailable, add_ramps
from spark_jobs.experiments.admin.snapshot import (
    EmptySnapshotRefused,
    latest_snapshot_path,
    publish_for_run,
    publish_snapshot,
    read_snapshot,
    snapshot_paths,
    snapshot_published_ms,
    write_snapshot,
)
from spark_jobs.experiments.admin.snapshot_alerts import STALE_INTERVALS, StaleSnapshotAlarm
from spark_jobs.experiments.core.periods import Period, RampRow
from spark_jobs.streaming.lake.delta import read_arrow, table_exists

HOUR = 3_600_000
DAY = 24 * HOUR


def sqlite_file(settings) -> Path:
    return Path(settings.metadata.url.removeprefix("sqlite:///"))


def test_a_missing_database_is_neither_created_nor_published(make_settings):
    settings = make_settings()
    with pytest.raises(MetadataUnavailable, match="names a database that does not exist"):
        publish_snapshot(settings, HOUR, None)
    with pytest.raises(MetadataUnavailable, match="does not exist"):
        publish_for_run(settings, HOUR)
    assert not sqlite_file(settings).exists()
    assert snapshot_paths(settings.lake.snapshots) == []


@pytest.mark.parametrize(
    ("make_db", "message"),
    [
        (lambda path: sqlite3.connect(path).close(), "has no `ramps` table"),
        (lambda path: path.write_text("not a database at all\n" * 100), "cannot read"),
    ],
    ids=["no_ramps_table", "not_a_database"],
)
def test_a_database_without_ramps_fails_in_one_line(make_settings, make_db, message):
    settings = make_settings()
    file = sqlite_file(settings)
    file.parent.mkdir(parents=True, exist_ok=True)
    make_db(file)
    with pytest.raises(MetadataUnavailable, match=message) as refused:
        publish_snapshot(settings, HOUR, None)
    assert "\n" not in str(refused.value)
    assert snapshot_paths(settings.lake.snapshots) == []


@pytest.mark.integration
def test_on_postgres_a_missing_database_or_table_fails_in_one_line(make_settings,
                                                                   private_postgres):
    from helpers.postgres import new_database

    from spark_jobs.local.postgres.server import layout, role_password

    password = role_password(private_postgres, layout(private_postgres))
    settings = make_settings(metadata={"url": private_postgres.url("no_such_db", password)})
    with pytest.raises(MetadataUnavailable, match=r"cannot read the metadata DB at metadata"
                       r"\.url postgresql\+psycopg2://tideline:\*\*\*@.*"
                       r'database "no_such_db" does not exist'):
        publish_snapshot(settings, HOUR, None)
    settings = make_settings(metadata={"url": new_database(private_postgres, "guards")})
    with pytest.raises(MetadataUnavailable, match="has no `ramps` table") as refused:
        publish_for_run(settings, HOUR)
    assert "\n" not in str(refused.value)
    assert snapshot_paths(settings.lake.snapshots) == []


def test_an_empty_snapshot_never_replaces_periods_still_inside_the_lookback(make_settings):
    settings = make_settings(experiments={"period": "1d", "window": "15m"})
    url = settings.metadata.url
    add_ramps(url, [RampRow("x", "g", HOUR, 10, False)])
    first = publish_snapshot(settings, 2 * HOUR, DAY)
    assert len(read_snapshot(first)) == 1

    with sqlite3.connect(sqlite_file(settings)) as db:  # the ramps are lost
        db.execute("DELETE FROM ramps")
    with pytest.raises(EmptySnapshotRefused, match=rf"{first.name} has 1 period"):
        publish_snapshot(settings, 3 * HOUR, DAY)
    with pytest.raises(EmptySnapshotRefused):
        publish_for_run(settings, 3 * HOUR)  # the DAG's lookback: experiments.period = 1d
    assert latest_snapshot_path(settings.lake.snapshots) == first

    # once the previous periods have left the lookback, an empty snapshot is the truth
    later = publish_snapshot(settings, HOUR + DAY, DAY)
    assert read_snapshot(later) == []


def test_an_empty_first_snapshot_is_published(make_settings):
    settings = make_settings()
    add_ramps(settings.metadata.url, [])
    assert read_snapshot(publish_snapshot(settings, HOUR, None)) == []


def _alerts(settings):
    uri = settings.lake.table("alerts")
    return read_arrow(uri).to_pylist() if table_exists(uri) else []


@pytest.mark.integration
def test_a_stale_snapshot_alerts_once_per_snapshot(make_settings, tmp_path):
    settings = make_settings(experiments={"snapshot_interval": "1m"})
    snapshot = write_snapshot(tmp_path / "snaps", [Period("x", "g", 0, DAY, 10, False)], 0)
    published_s = snapshot_published_ms(snapshot) / 1000
    now = [published_s + STALE_INTERVALS * 60]
    alarm = StaleSnapshotAlarm(settings, "filter_activations", clock=lambda: now[0])

    assert alarm.check(None) is None
    assert alarm.check(snapshot) is None  # exactly 3 intervals old: not yet stale
    now[0] += 1
    alert = alarm.check(snapshot)
    assert alert is not None and alert.kind == "snapshot_stale"
    assert snapshot.name in alert.summary and alert.threshold == 180
    for _ in range(3):  # every later batch on the same snapshot
        now[0] += 60
        assert alarm.check(snapshot) is None
    restarted = StaleSnapshotAlarm(settings, "filter_activations", clock=lambda: now[0])
    assert restarted.check(snapshot) is None  # the job restarted: still the same episode

    newer = write_snapshot(tmp_path / "snaps", [], 1)  # published now: a fresh episode
    now[0] = snapshot_published_ms(newer) / 1000
    assert alarm.check(newer) is None
    now[0] += STALE_INTERVALS * 60 + 1
    assert alarm.check(newer) is not None

    rows = _alerts(settings)
    assert [(r["source"], r["kind"]) for r in rows] == [
        ("filter_activations", "snapshot_stale"), ("filter_activations", "snapshot_stale"),
    ]
