"""Every bad argument and every bad configuration of every `tideline` command: exit 2 and
exactly one line on stderr, before anything starts (CONTRACTS.md section 6); a failure while
running exits 1 with one line (issue 14)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from spark_jobs.cli import main
from spark_jobs.experiments.admin.metadata import add_ramps
from spark_jobs.experiments.admin.snapshot import EmptySnapshotRefused, publish_snapshot
from spark_jobs.experiments.core.periods import RampRow
from spark_jobs.settings import load_settings
from spark_jobs.streaming.lake.delta import read_arrow

RULE_OK = '{"ruleId": 1, "ruleState": "DELETE"}'

# (id, argv, environment, expected message); "{tmp}" is replaced by the test's folder.
BAD_ARGUMENTS = [
    ("no_command", [], {}, "required: COMMAND"),
    ("unknown_command", ["nope"], {}, "invalid choice: 'nope'"),
    ("unknown_option", ["job", "run", "filter_events", "--bogus"], {}, "unrecognized"),
    ("broker_port_text", ["broker", "--port", "abc"], {}, "not a port number"),
    ("broker_port_zero", ["broker", "--port", "0"], {}, "must be a port number"),
    ("broker_port_high", ["broker", "--port", "70000"], {}, "must be a port number"),
    ("broker_bootstrap_no_port", ["broker"], {"TIDELINE_KAFKA__BOOTSTRAP": "localhost"},
     "has no port"),
    ("demo_rate_negative", ["demo", "--rate", "-1"], {}, "must be a positive number"),
    ("demo_rate_nan", ["demo", "--rate", "nan"], {}, "must be a positive number"),
    ("demo_seconds_zero", ["demo", "--seconds", "0"], {}, "must be a positive number"),
    ("platform_users_zero", ["platform", "--users", "0"], {}, "must be a positive integer"),
    ("platform_seconds_text", ["platform", "--seconds", "soon"], {}, "not a positive number"),
    ("generate_users_negative", ["generate", "--users", "-5"], {}, "must be a positive integer"),
    ("generate_seed_negative", ["generate", "--seed", "-1"], {}, "must be an integer >= 0"),
    ("generate_duration_bad", ["generate", "--duration", "3 days"], {}, "not a duration"),
    ("generate_duration_zero", ["generate", "--duration", "0"], {},
     "duration_ms must be positive"),
    ("generate_start_bad", ["generate", "--start", "yesterday"], {}, "not a time"),
    ("generate_rate_zero", ["generate", "--rate", "0"], {}, "must be a positive number"),
    ("generate_ramps_csv_folder", ["generate", "--ramps-csv", "{tmp}"], {}, "is a folder"),
    ("metadata_no_action", ["metadata"], {}, "required: ACTION"),
    ("metadata_missing_file", ["metadata", "load", "{tmp}/missing.csv"], {}, "cannot open"),
    ("metadata_folder", ["metadata", "load", "{tmp}"], {}, "cannot open"),
    ("snapshot_as_of_bad", ["snapshot", "publish", "--as-of", "yesterday"], {}, "not a time"),
    ("snapshot_lookback_bad", ["snapshot", "publish", "--lookback", "3 days"], {},
     "not a duration"),
    ("snapshot_lookback_negative", ["snapshot", "publish", "--lookback=-1h"], {},
     "not a duration"),
    ("recompute_no_date", ["recompute"], {}, "required: --date"),
    ("recompute_bad_date", ["recompute", "--date", "2026-13-01"], {}, "not a date"),
    ("validate_bad_date", ["validate", "--date", "tomorrow"], {}, "not a date"),
    ("job_unknown", ["job", "run", "nope"], {}, "unknown job 'nope'"),
    ("job_no_name", ["job", "run"], {}, "required: name"),
    ("jobs_unknown", ["jobs", "status", "nope"], {}, "unknown job 'nope'"),
    ("jobs_unknown_action", ["jobs", "restart"], {}, "invalid choice: 'restart'"),
    ("samples_bad_date", ["samples", "shadow", "--date", "2026-02-30"], {}, "not a date"),
    ("rules_id_text", ["rules", "pause", "seven"], {}, "invalid int value"),
    ("rules_alerts_zero", ["rules", "list", "--alerts", "0"], {}, "must be a positive integer"),
    ("rules_missing_file", ["rules", "add", "@{tmp}/rule.json"], {}, "no rule file"),
    ("rules_invalid_json", ["rules", "add", "{not json"], {}, "invalid rule"),
    ("rules_check_bad_date", ["rules", "check", "--date", "x"], {}, "not a date"),
    ("dashboard_port_negative", ["dashboard", "--port", "-1"], {}, "must be a port number"),
    ("config_unknown_section", ["config", "show", "--section", "nope"], {},
     "unknown config section 'nope'"),
]

# (id, file text or None, environment, expected message); run with `config show` and with
# `snapshot publish`: a bad configuration stops every command the same way.
BAD_CONFIGURATION = [
    ("file_missing", None, {"TIDELINE_CONFIG": "{tmp}/nope.yaml"}, "which is not a file"),
    ("file_is_folder", None, {"TIDELINE_CONFIG": "{tmp}"}, "which is not a file"),
    ("file_bad_yaml", "kafka:\n  bootstrap: [\n", {}, "not valid YAML"),
    ("file_bad_yaml_tab", "kafka:\n\tpartitions: 2\n", {}, "not valid YAML"),
    ("file_not_utf8", b"\xff\xfe kafka", {}, "not UTF-8"),
    ("file_a_list", "- kafka\n- spark\n", {}, "top level must be a map"),
    ("file_impossible_date", "validation:\n  start_date: 2026-13-01\n", {}, "not valid YAML"),
    ("file_unknown_section", "kafkaa:\n  bootstrap: x:1\n", {}, "unknown config section"),
    ("empty_lake_root", None, {"TIDELINE_LAKE__ROOT": ""}, "lake.root must be a path or URI"),
    ("empty_spark_master", None, {"TIDELINE_SPARK__MASTER": " "}, "spark.master must be"),
    ("clock_skew_not_duration", None, {"TIDELINE_JOBS__MAX_CLOCK_SKEW": "soon"}, "max_clock_skew"),
    ("max_message_bytes_zero", None, {"TIDELINE_JOBS__MAX_MESSAGE_BYTES": "0"},
     "max_message_bytes"),
    ("file_unknown_key", "kafka:\n  bootstrapp: x:1\n", {}, "unknown setting kafka.bootstrapp"),
    ("file_section_not_map", "kafka: 3\n", {}, "must be a map"),
    ("env_unknown_key", None, {"TIDELINE_KAFKA__NOPE": "1"}, "unknown setting kafka.nope"),
    ("env_bad_yaml", None, {"TIDELINE_KAFKA__CLIENT": "{a: [}"}, "not valid YAML"),
    ("wrong_kind", None, {"TIDELINE_KAFKA__PARTITIONS": "many"}, "positive integer"),
    ("negative_size", None, {"TIDELINE_JOBS__MAX_RECORDS_PER_TRIGGER": "-1"},
     "positive integer"),
    ("zero_count", None, {"TIDELINE_FRAUD__SHARDS": "0"}, "positive integer"),
    ("duration_no_unit", None, {"TIDELINE_EXPERIMENTS__PERIOD": "3"}, "has no unit"),
    ("duration_bad", None, {"TIDELINE_EXPERIMENTS__PERIOD": "3x"}, "experiments.period"),
    ("duration_negative", None, {"TIDELINE_EXPERIMENTS__WINDOW": "-15m"}, "not a duration"),
    ("window_over_period", None, {"TIDELINE_EXPERIMENTS__WINDOW": "4d"}, "must not be longer"),
    ("fraction_out_of_range", None, {"TIDELINE_VALIDATION__MAX_DRIFT": "2"}, "fraction"),
    ("bad_date", None, {"TIDELINE_VALIDATION__START_DATE": "2026-13-01"},
     "validation.start_date must be a date"),
    ("bad_choice", None, {"TIDELINE_STATS__METHOD": "magic"}, "stats.method must be one of"),
    ("bad_flag", None, {"TIDELINE_FRAUD__ALERT_ON_LATE_EVENTS": "maybe"}, "true or false"),
    ("empty_bootstrap", None, {"TIDELINE_KAFKA__BOOTSTRAP": ""}, "kafka.bootstrap must be"),
    ("map_expected", None, {"TIDELINE_SPARK__CONF": "3"}, "spark.conf must be a map"),
    ("bad_metadata_url", None, {"TIDELINE_METADATA__URL": "metadata.db"}, "metadata.url must"),
    ("bad_webhook", None, {"TIDELINE_ALERTS__WEBHOOK_URL": "ftp://x"}, "http(s) URL"),
    ("bad_registry_url", None, {"TIDELINE_KAFKA__SCHEMA_REGISTRY_URL": "127.0.0.1:8081"},
     "kafka.schema_registry_url must be an http(s) URL"),
    ("bad_email", None, {"TIDELINE_ALERTS__EMAIL_TO": "nobody"}, "e-mail"),
    ("port_too_high", None, {"TIDELINE_AIRFLOW__PORT": "70000"}, "port number"),
    ("port_zero", None, {"TIDELINE_DASHBOARD__PORT": "0"}, "port number"),
    ("empty_host", None, {"TIDELINE_DASHBOARD__HOST": ""}, "dashboard.host must be"),
    ("unknown_deployed_job", None, {"TIDELINE_MONITOR__JOBS": "nope"}, "monitor.jobs"),
    ("env_not_a_map", None, {"TIDELINE_KAFKA__CLIENT": "1", "TIDELINE_KAFKA__CLIENT__X": "2"},
     "not a map"),
]


@pytest.fixture
def tideline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
             ) -> Callable[..., tuple[int, list[str]]]:
    """Run `tideline ARGV` in this process with only the given TIDELINE_* variables (and a
    lake under tmp_path); returns the exit status and the lines of stderr."""
    for name in list(os.environ):
        if name.startswith("TIDELINE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("TIDELINE_LAKE__ROOT", str(tmp_path / "lake"))

    def run(argv: list[str], env: dict[str, str]) -> tuple[int, list[str]]:
        for name, value in env.items():
            monkeypatch.setenv(name, value.replace("{tmp}", str(tmp_path)))
        capsys.readouterr()
        try:
            code = main([arg.replace("{tmp}", str(tmp_path)) for arg in argv])
        except SystemExit as exit_:
            code = exit_.code
        return code, capsys.readouterr().err.splitlines()

    return run


def assert_one_line(code: int, lines: list[str], expected_code: int, message: str) -> None:
    assert code == expected_code, lines
    assert len(lines) == 1, lines
    assert lines[0].startswith("tideline: error: ") and message in lines[0], lines[0]


@pytest.mark.parametrize(("argv", "env", "message"),
                         [case[1:] for case in BAD_ARGUMENTS], ids=[c[0] for c in BAD_ARGUMENTS])
def test_a_bad_argument_exits_2_with_one_line(tideline, argv, env, message):
    assert_one_line(*tideline(argv, env), 2, message)


@pytest.mark.parametrize("argv", [["config", "show"], ["snapshot", "publish"]])
@pytest.mark.parametrize(("text", "env", "message"),
                         [case[1:] for case in BAD_CONFIGURATION],
                         ids=[c[0] for c in BAD_CONFIGURATION])
def test_a_bad_configuration_exits_2_with_one_line(tideline, tmp_path, argv, text, env,
                                                   message):
    if text is not None:
        config = tmp_path / "tideline.yaml"
        config.write_bytes(text if isinstance(text, bytes) else text.encode())
        env = {**env, "TIDELINE_CONFIG": str(config)}
    assert_one_line(*tideline(argv, env), 2, message)


def test_a_missing_metadata_database_alerts_and_is_not_created(tideline, tmp_path):
    code, lines = tideline(["snapshot", "publish"], {})
    assert_one_line(code, lines, 2, "names a database that does not exist")
    assert not (tmp_path / "lake" / "metadata.db").exists()
    alerts = read_arrow(str(tmp_path / "lake" / "alerts")).to_pylist()
    assert [(a["source"], a["kind"]) for a in alerts] == [("ramp_snapshot", "snapshot_refused")]
    assert "does not exist" in alerts[0]["summary"]


def _lost_ramps(tmp_path: Path) -> None:
    """A published snapshot with a current period, then a metadata DB that lost its ramps."""
    settings = load_settings(environ={"TIDELINE_LAKE__ROOT": str(tmp_path / "lake")})
    add_ramps(settings.metadata.url, [RampRow("x", "g", 1_000, 10, False)])
    publish_snapshot(settings, 2_000, None)
    with sqlite3.connect(tmp_path / "lake" / "metadata.db") as db:
        db.execute("DELETE FROM ramps")


def test_a_failure_while_running_exits_1_with_one_line_and_alerts(tideline, tmp_path):
    _lost_ramps(tmp_path)
    code, lines = tideline(["snapshot", "publish", "--as-of", "3000", "--lookback", "all"], {})
    assert_one_line(code, lines, 1, "EmptySnapshotRefused: refusing to publish an empty")
    alerts = read_arrow(str(tmp_path / "lake" / "alerts")).to_pylist()
    assert [a["kind"] for a in alerts] == ["snapshot_refused"]


def test_tideline_debug_shows_the_traceback_of_a_failure(tideline, tmp_path, monkeypatch):
    _lost_ramps(tmp_path)
    monkeypatch.setenv("TIDELINE_DEBUG", "1")
    with pytest.raises(EmptySnapshotRefused):
        tideline(["snapshot", "publish", "--as-of", "3000", "--lookback", "all"], {})
