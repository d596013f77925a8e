"""Provenance: each `section.key` knows the layers it came from (default, the file, the
environment variables, the overrides), and maps list every layer that added keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_jobs.settings import DEFAULTS, build_settings, load_settings


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "tideline.yaml"
    path.write_text(text)
    return str(path)


def test_every_key_comes_from_the_defaults_without_file_or_env():
    sources = load_settings(environ={}).sources
    assert set(sources) == {f"{s}.{k}" for s, keys in DEFAULTS.items() for k in keys}
    assert set(sources.values()) == {("default",)}


def test_each_layer_names_itself(tmp_path):
    path = write(tmp_path, "experiments:\n  window: 5m\n  lateness: 1m\n")
    environ = {"TIDELINE_CONFIG": path, "TIDELINE_EXPERIMENTS__LATENESS": "30s"}
    sources = load_settings(environ=environ, overrides={"jobs": {"trigger": "2s"}}).sources
    assert sources["experiments.period"] == ("default",)
    assert sources["experiments.window"] == (path,)
    assert sources["experiments.lateness"] == ("TIDELINE_EXPERIMENTS__LATENESS",)
    assert sources["jobs.trigger"] == ("override",)


def test_a_map_lists_every_layer_that_added_keys(tmp_path):
    path = write(tmp_path, "kafka:\n  client:\n    security.protocol: SASL_SSL\n")
    environ = {"TIDELINE_CONFIG": path, "TIDELINE_KAFKA__CLIENT__SASL.USERNAME": "u"}
    settings = load_settings(environ=environ, overrides={"kafka": {"client": {"x": 1}}})
    assert settings.sources["kafka.client"] == (
        path, "TIDELINE_KAFKA__CLIENT__SASL.USERNAME", "override")
    assert settings.sources["spark.conf"] == ("default",)  # the empty default map


@pytest.mark.parametrize("reverse", [False, True])
def test_a_whole_map_and_a_nested_key_from_the_environment_are_both_named(reverse):
    items = [("TIDELINE_KAFKA__CLIENT", "{a: 1}"), ("TIDELINE_KAFKA__CLIENT__B", "2")]
    environ = dict(reversed(items) if reverse else items)
    assert load_settings(environ=environ).sources["kafka.client"] == (
        "TIDELINE_KAFKA__CLIENT", "TIDELINE_KAFKA__CLIENT__B")


def test_a_map_replaced_by_a_later_layer_names_only_that_layer(tmp_path):
    path = write(tmp_path, "kafka:\n  client:\n    a: 1\n")
    environ = {"TIDELINE_CONFIG": path, "TIDELINE_KAFKA__CLIENT": "null"}
    settings = load_settings(environ=environ)
    assert settings.kafka.client == {}
    assert settings.sources["kafka.client"] == ("TIDELINE_KAFKA__CLIENT",)


def test_sources_do_not_change_equality_and_code_built_settings_have_none():
    assert load_settings(environ={"TIDELINE_JOBS__TRIGGER": "1s"}) == load_settings(environ={})
    assert build_settings(load_settings(environ={}).raw).sources == {}
