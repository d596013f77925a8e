"""`tideline config show`: one line per setting with its value as written, its source and
its meaning; credentials masked; a bad section or configuration exits 2 in one line."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml

from spark_jobs.cli import main
from spark_jobs.config.fields import declarations
from spark_jobs.settings import SECTIONS, load_settings

LINE = re.compile(
    r"^(?P<key>[a-z_]+\.[a-z_]+) = (?P<value>.*?) +\((?P<source>[^()]*)\) +# (?P<meaning>.+)$"
)


@pytest.fixture
def environ(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A clean Tideline environment; returns a setter for TIDELINE_* variables."""
    for name in list(os.environ):
        if name.startswith("TIDELINE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("TIDELINE_LAKE__ROOT", str(tmp_path / "lake"))
    return monkeypatch.setenv


def show(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    code = main(["config", "show", *args])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def parsed(lines: list[str]) -> dict[str, dict[str, str]]:
    rows = {}
    for line in lines:
        match = LINE.match(line)
        assert match, line
        rows[match["key"]] = match.groupdict()
    return rows


def test_one_line_per_declared_setting_in_declaration_order(environ, capsys):
    code, lines, _ = show(capsys)
    assert code == 0
    expected = [f"{name}.{d.key}" for name, section in SECTIONS.items()
                for d in declarations(section)]
    assert list(parsed(lines)) == expected


def test_values_sources_meanings_and_units(environ, capsys, tmp_path):
    path = tmp_path / "tideline.yaml"
    path.write_text("experiments:\n  window: PT5M\n")
    environ("TIDELINE_CONFIG", str(path))
    environ("TIDELINE_FRAUD__SHARDS", "4")
    _, lines, _ = show(capsys)
    rows = parsed(lines)
    assert rows["experiments.period"]["value"] == "3d"  # default, as written
    assert rows["experiments.period"]["source"] == "default"
    assert rows["experiments.window"]["value"] == "PT5M"  # as the user wrote it
    assert rows["experiments.window"]["source"] == str(path)
    assert (rows["fraud.shards"]["value"], rows["fraud.shards"]["source"]) == (
        "4", "TIDELINE_FRAUD__SHARDS")
    assert rows["lake.checkpoints"]["value"] == f"{tmp_path}/lake/_checkpoints"
    assert rows["lake.checkpoints"]["source"] == "default, derived"
    assert rows["monitor.jobs"]["value"] == (
        "[filter_events, filter_activations, experiment_metrics]")
    assert rows["fraud.alert_on_late_events"]["value"] == "false"
    assert rows["alerts.webhook_url"]["value"] == "null"
    assert rows["kafka.partitions"]["meaning"] == (
        "partitions of the topics Tideline creates [partitions]")


def test_credentials_in_client_maps_are_masked(environ, capsys):
    environ("TIDELINE_KAFKA__CLIENT", "{sasl.username: alice, sasl.password: hunter2, "
            "sasl.jaas.config: 'org.Login required password=\"pw2\";', ssl.key.password: pw3}")
    environ("TIDELINE_SPARK__CONF",
            "{spark.hadoop.fs.s3a.secret.key: pw4, spark.ui.enabled: false}")
    _, lines, _ = show(capsys)
    text = "\n".join(lines)
    for secret in ("hunter2", "pw2", "pw3", "pw4"):
        assert secret not in text
    rows = parsed(lines)
    assert rows["kafka.client"]["value"] == (
        "{sasl.username: alice, sasl.password: ***, sasl.jaas.config: ***, ssl.key.password: ***}")
    assert rows["spark.conf"]["value"] == (
        "{spark.hadoop.fs.s3a.secret.key: ***, spark.ui.enabled: false}")


def test_section_option_shows_one_section(environ, capsys):
    code, lines, _ = show(capsys, "--section", "kafka")
    assert code == 0
    assert list(parsed(lines)) == ["kafka.bootstrap", "kafka.client", "kafka.partitions",
                                   "kafka.broker_bind", "kafka.schema_registry_url"]


def test_unknown_section_exits_2_with_the_known_ones(environ, capsys):
    code, lines, err = show(capsys, "--section", "kafak")
    assert (code, lines) == (2, [])
    assert err.strip().splitlines() == [
        "tideline: error: unknown config section 'kafak' (known: kafka, spark, lake, cluster, "
        "postgres, metadata, experiments, jobs, alerts, airflow, validation, monitor, "
        "maintenance, stats, dashboard, fraud, samples)"]


def test_a_bad_configuration_exits_2_in_one_line(environ, capsys):
    environ("TIDELINE_FRAUD__STATE", "gpu")
    code, lines, err = show(capsys)
    assert (code, lines) == (2, [])
    assert err.strip().splitlines() == [
        "tideline: error: fraud.state must be one of driver, spark, got 'gpu'"]


def test_shown_values_read_back_as_the_same_settings(environ, capsys):
    """What `config show` prints can be pasted into a config file or variable as is."""
    environ("TIDELINE_EXPERIMENTS__CRITICAL_EVENT_TYPES", "click, impression")
    environ("TIDELINE_VALIDATION__START_DATE", "2026-01-01")
    environ("TIDELINE_ALERTS__EMAIL_TO", "a@x.org")
    _, lines, _ = show(capsys)
    rows = parsed(lines)
    settings = load_settings()
    for name, section in SECTIONS.items():
        for d in declarations(section):
            row = rows[f"{name}.{d.key}"]
            if "derived" in row["source"]:
                continue
            typed = d.setting.kind.parse(yaml.safe_load(row["value"]), row["key"])
            assert typed == getattr(getattr(settings, name), d.attribute), row
