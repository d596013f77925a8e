"""The jobs page's Spark section: applications, UI links, state on the master."""

from __future__ import annotations

from pathlib import Path

from spark_jobs.control.ui.html_tables import Link
from spark_jobs.control.ui.spark_apps import application_rows, master_states, spark_section
from spark_jobs.settings import load_settings
from spark_jobs.streaming.application import application_path
from spark_jobs.streaming.spark_session import tools_conf

MASTER_JSON = {
    "activeapps": [{"id": "app-2", "state": "RUNNING"}],
    "completedapps": [{"id": "app-1", "state": "FINISHED"}],
}


def test_master_states_cover_active_and_completed_applications() -> None:
    assert master_states(MASTER_JSON) == {"app-2": "RUNNING", "app-1": "FINISHED"}
    assert master_states(None) == {}


def test_rows_link_each_job_to_its_ui_and_state() -> None:
    applications = {
        "filter_events": {"app_id": "app-2", "ui": "http://127.0.0.1:4040",
                          "master": "spark://127.0.0.1:7077"},
        "experiment_metrics": {"app_id": "app-9", "ui": None, "master": "spark://x:7077"},
        "fraud_rules": None,
    }
    rows = application_rows(["filter_events", "experiment_metrics", "fraud_rules"],
                            applications, master_states(MASTER_JSON))
    assert rows == [
        ["filter_events", "app-2", Link("http://127.0.0.1:4040", "http://127.0.0.1:4040"),
         "spark://127.0.0.1:7077", "RUNNING"],
        ["experiment_metrics", "app-9", "(UI off)", "spark://x:7077", "unknown to the master"],
    ]
    local = application_rows(["filter_events"], applications, None)
    assert local[0][-1] == "(not on a standalone master)"


def test_section_says_when_the_master_does_not_answer(tmp_path: Path) -> None:
    settings = load_settings(environ={}, overrides={
        "lake": {"root": str(tmp_path)}, "spark": {"master": "spark://127.0.0.1:1"},
        "cluster": {"master_ui_port": 1}})
    path = application_path(settings, "filter_events")
    path.parent.mkdir(parents=True)
    path.write_text('{"app_id": "app-7", "ui": "http://127.0.0.1:4041", "master": "m"}')
    html = spark_section(settings, ["filter_events", "fraud_rules"])
    assert "not answering" in html and "http://127.0.0.1:4041" in html and "app-7" in html
    assert "unknown to the master" in html


def test_tools_turn_on_the_ui_and_a_rolling_event_log(tmp_path: Path) -> None:
    settings = load_settings(environ={}, overrides={"lake": {"root": str(tmp_path)}})
    conf = tools_conf(settings)
    assert conf["spark.ui.enabled"] == "true" and conf["spark.ui.port"] == "4040"
    assert conf["spark.eventLog.dir"] == f"{tmp_path}/_spark_events"
    assert (tmp_path / "_spark_events").is_dir()
    assert conf["spark.eventLog.rolling.enabled"] == "true"
