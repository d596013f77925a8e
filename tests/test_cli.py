"""The `tideline` command line: the contract's commands exist, work, and fail in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from spark_jobs.contracts.tables import SNAPSHOT_HEADER
from spark_jobs.experiments.admin.snapshot import latest_snapshot_path, read_snapshot

pytestmark = pytest.mark.integration

HOUR = 3_600_000


def _tideline(*args: str, lake: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "TIDELINE_LAKE__ROOT": str(lake), **env}
    environ.pop("TIDELINE_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "spark_jobs.cli", *args],
        capture_output=True, text=True, env=environ, timeout=120,
    )


def test_help_lists_every_contract_command(tmp_path: Path) -> None:
    result = _tideline("--help", lake=tmp_path)
    assert result.returncode == 0
    for command in ("broker", "generate", "metadata", "snapshot", "job", "demo"):
        assert command in result.stdout
    job_help = _tideline("job", "run", "--help", lake=tmp_path)
    assert "--available-now" in job_help.stdout


def test_metadata_load_and_snapshot_publish(tmp_path: Path) -> None:
    ramps = tmp_path / "ramps.csv"
    ramps.write_text(
        "experiment_hash,experiment_group,ramp_ts,allocation_pct,is_control\n"
        f"exp_a,control,{HOUR},10,true\n"
        f"exp_a,treatment,{HOUR},10,false\n"
        f"exp_a,treatment,{2 * HOUR},20,false\n"  # ramp-up inside the period: no new period
        f"exp_b,control,{5 * 24 * HOUR},10,true\n"  # after as_of: not in the snapshot
    )
    loaded = _tideline("metadata", "load", str(ramps), lake=tmp_path)
    assert loaded.returncode == 0, loaded.stderr
    assert "loaded 4" in loaded.stdout

    published = _tideline(
        "snapshot", "publish", "--as-of", "1970-01-02T00:00:00Z", "--lookback", "all",
        lake=tmp_path,
    )
    assert published.returncode == 0, published.stderr
    path = latest_snapshot_path(tmp_path / "ramp_snapshots")
    assert path is not None
    assert path.read_text().splitlines()[0] == ",".join(SNAPSHOT_HEADER)
    rows = read_snapshot(path)
    assert sorted((r.experiment_group, r.group_ramp_time) for r in rows) == [
        ("control", HOUR), ("treatment", HOUR),
    ]


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (("job", "run", "nope"), {}, "unknown job 'nope'"),
        (("snapshot", "publish", "--as-of", "yesterday"), {}, "not a time"),
        (("snapshot", "publish", "--lookback", "3 days"), {}, "not a duration"),
        (("snapshot", "publish",), {"TIDELINE_EXPERIMENTS__PERIOD": "3x"}, "experiments.period"),
        (("snapshot", "publish",), {"TIDELINE_KAFKA__NOPE": "1"}, "unknown setting kafka.nope"),
        (("broker",), {"TIDELINE_KAFKA__BOOTSTRAP": "localhost"}, "has no port"),
        (("broker",), {"TIDELINE_KAFKA__BOOTSTRAP": "localhost:kafka"}, "has no port"),
        (("snapshot", "publish"), {}, "names a database that does not exist"),  # alerts too
        (("broker", "--port", "http"), {}, "not a port number"),
        (("config", "show"), {"TIDELINE_KAFKA__CLIENT": "{a: [}"}, "not valid YAML"),
    ],
)
def test_bad_arguments_and_configuration_exit_nonzero_with_one_line(
    tmp_path: Path, args: tuple[str, ...], env: dict[str, str], message: str
) -> None:
    result = _tideline(*args, lake=tmp_path, **env)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0]


def test_job_run_with_unreachable_kafka_fails_at_start_with_what_to_fix(tmp_path: Path) -> None:
    result = _tideline(
        "job", "run", "filter_events", lake=tmp_path, TIDELINE_KAFKA__BOOTSTRAP="127.0.0.1:9"
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot reach Kafka at '127.0.0.1:9'" in lines[0]
    assert "kafka.bootstrap" in lines[0]


def test_bad_ramps_csv_names_file_line_and_field(tmp_path: Path) -> None:
    ramps = tmp_path / "bad.csv"
    ramps.write_text(
        "experiment_hash,experiment_group,ramp_ts,allocation_pct,is_control\n"
        "exp_a,control,soon,10,true\n"
    )
    result = _tideline("metadata", "load", str(ramps), lake=tmp_path)
    assert result.returncode == 2
    assert "bad.csv:2" in result.stderr and "ramp_ts" in result.stderr


def test_dashboard_serves_until_stopped_and_a_busy_port_is_a_clear_error(tmp_path: Path) -> None:
    import signal
    import socket
    import time
    import urllib.request

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = _tideline("dashboard", "--port", str(port), lake=tmp_path)
    assert result.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "dashboard.port" in result.stderr and "Traceback" not in result.stderr

    environ = {**os.environ, "TIDELINE_LAKE__ROOT": str(tmp_path)}
    environ.pop("TIDELINE_CONFIG", None)
    server = subprocess.Popen([sys.executable, "-m", "spark_jobs.cli", "dashboard", "--port",
                               str(port)], env=environ, stdout=subprocess.PIPE, text=True)
    try:
        assert f"dashboard on http://127.0.0.1:{port}/" in server.stdout.readline()
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
                    assert r.status == 200
                    break
            except OSError:
                assert time.monotonic() < deadline, "the dashboard never answered"
                time.sleep(0.2)
    finally:
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=30) in (0, 130)


@pytest.mark.kafka
def test_rules_add_pause_activate_delete_list(tmp_path: Path, own_broker: str) -> None:
    env = {"TIDELINE_KAFKA__BOOTSTRAP": own_broker}
    rule = ('{"ruleId": 7, "ruleState": "ACTIVE", "groupingKeyNames": ["payeeId"], '
            '"aggregateFieldName": "paymentAmount", "aggregatorFunctionType": "SUM", '
            '"limitOperatorType": "GREATER", "limit": 500, "windowMinutes": 30}')
    rule_file = tmp_path / "rule.json"
    rule_file.write_text(rule.replace('"ruleId": 7', '"ruleId": 8'))
    assert _tideline("rules", "add", rule, lake=tmp_path, **env).returncode == 0
    assert _tideline("rules", "add", f"@{rule_file}", lake=tmp_path, **env).returncode == 0
    assert _tideline("rules", "pause", "7", lake=tmp_path, **env).returncode == 0
    listing = _tideline("rules", "list", lake=tmp_path, **env)
    lines = [line.split() for line in listing.stdout.splitlines()]
    assert lines[1][:3] == ["7", "PAUSE", "payeeId"] and lines[2][:2] == ["8", "ACTIVE"]
    assert "SUM(paymentAmount) GREATER 500" in listing.stdout and "no alerts yet" in listing.stdout
    assert _tideline("rules", "activate", "7", lake=tmp_path, **env).returncode == 0
    assert _tideline("rules", "delete", "8", lake=tmp_path, **env).returncode == 0
    listing = _tideline("rules", "list", lake=tmp_path, **env).stdout
    assert "7  ACTIVE" in listing and "\n     8 " not in listing
    bad = _tideline("rules", "add", '{"ruleId": 9, "ruleState": "ACTIVE"}', lake=tmp_path, **env)
    assert bad.returncode == 2 and "invalid rule" in bad.stderr
    missing = _tideline("rules", "pause", "99", lake=tmp_path, **env)
    assert missing.returncode == 2 and "no current rule 99" in missing.stderr
