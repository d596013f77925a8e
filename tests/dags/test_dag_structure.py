"""The DAG folder as Airflow parses it: no import errors, and each DAG's schedule, catch-up,
tasks and dependencies as the platform relies on them."""

from __future__ import annotations

import pytest
from helpers.airflow_setup import describe_dags

from spark_jobs.control.orchestration.environment import DAG_IDS

pytestmark = pytest.mark.airflow

JOBS = ("filter_events", "filter_activations", "experiment_metrics")
CASES = ("single_ramp", "multi_ramp_in_first_period", "ramps_after_first_period")


def test_every_dag_imports_without_errors(dag_structure):
    assert dag_structure["import_errors"] == {}
    assert sorted(dag_structure["dags"]) == list(DAG_IDS)  # one DAG per file, named after it
    assert set(DAG_IDS) >= {
        "daily_validation", "experiment_guardrails", "fraud_rules_shadow", "maintenance",
        "ramp_snapshot", "streaming_jobs", "training_samples_shadow",
    }


def test_ramp_snapshot_every_five_minutes_one_task(dag_structure):
    dag = dag_structure["dags"]["ramp_snapshot"]
    assert (dag["timetable"], dag["cron"], dag["catchup"]) == (
        "CronTriggerTimetable", "*/5 * * * *", False,
    )
    assert dag["tasks"] == {"publish": {"upstream": [], "trigger_rule": "all_success"}}


def test_experiment_guardrails_every_five_minutes_one_task(dag_structure):
    dag = dag_structure["dags"]["experiment_guardrails"]
    assert (dag["timetable"], dag["cron"], dag["catchup"]) == (
        "CronTriggerTimetable", "*/5 * * * *", False,
    )
    assert dag["tasks"] == {"check": {"upstream": [], "trigger_rule": "all_success"}}


def test_streaming_jobs_watches_each_job_then_summarizes(dag_structure):
    dag = dag_structure["dags"]["streaming_jobs"]
    assert (dag["timetable"], dag["cron"], dag["catchup"], dag["max_active_runs"]) == (
        "CronTriggerTimetable", "* * * * *", False, 1,
    )
    watches = sorted(f"watch_{job}" for job in JOBS)
    assert sorted(dag["tasks"]) == sorted([*watches, "summary"])
    for task_id in watches:
        assert dag["tasks"][task_id]["upstream"] == []
    assert dag["tasks"]["summary"] == {"upstream": watches, "trigger_rule": "all_done"}


def test_daily_validation_recomputes_validates_each_case_then_reports(dag_structure):
    dag = dag_structure["dags"]["daily_validation"]
    assert (dag["timetable"], dag["cron"], dag["timezone"], dag["catchup"]) == (
        "CronDataIntervalTimetable", "0 0 * * *", "UTC", True,
    )
    assert dag["start_date"] == "2026-01-01T00:00:00+00:00"  # validation.start_date
    assert dag["max_active_runs"] <= 2
    assert dag["params"] == ["day"]
    validates = sorted(f"validate_{case}" for case in CASES)
    assert sorted(dag["tasks"]) == sorted(["wait_for_day_closed", "recompute", *validates,
                                           "report"])
    assert dag["tasks"]["wait_for_day_closed"]["upstream"] == []
    assert dag["tasks"]["recompute"]["upstream"] == ["wait_for_day_closed"]
    for task_id in validates:
        assert dag["tasks"][task_id]["upstream"] == ["recompute"]
    assert dag["tasks"]["report"] == {"upstream": validates, "trigger_rule": "all_done"}


def test_training_samples_shadow_waits_for_the_day_then_compares(dag_structure):
    dag = dag_structure["dags"]["training_samples_shadow"]
    assert (dag["timetable"], dag["cron"], dag["timezone"], dag["catchup"]) == (
        "CronDataIntervalTimetable", "0 0 * * *", "UTC", True,
    )
    assert dag["start_date"] == "2026-01-01T00:00:00+00:00"  # validation.start_date
    assert dag["params"] == ["day"]
    assert dag["tasks"] == {
        "wait_for_samples": {"upstream": [], "trigger_rule": "all_success"},
        "compare": {"upstream": ["wait_for_samples"], "trigger_rule": "all_success"},
    }


def test_fraud_rules_shadow_waits_for_the_day_then_compares(dag_structure):
    dag = dag_structure["dags"]["fraud_rules_shadow"]
    assert (dag["timetable"], dag["cron"], dag["timezone"], dag["catchup"]) == (
        "CronDataIntervalTimetable", "0 0 * * *", "UTC", True,
    )
    assert dag["start_date"] == "2026-01-01T00:00:00+00:00"  # validation.start_date
    assert dag["params"] == ["day"]
    assert dag["tasks"] == {
        "wait_for_alerts": {"upstream": [], "trigger_rule": "all_success"},
        "compare": {"upstream": ["wait_for_alerts"], "trigger_rule": "all_success"},
    }


def test_maintenance_compacts_before_vacuum(dag_structure):
    dag = dag_structure["dags"]["maintenance"]
    assert (dag["cron"], dag["catchup"]) == ("0 3 * * *", False)
    upstream = {task_id: task["upstream"] for task_id, task in dag["tasks"].items()}
    assert upstream == {
        "compact_tables": [],
        "vacuum_tables": ["compact_tables"],
        "prune_snapshots": [],
        "clean_checkpoints": [],
    }


def test_a_config_error_is_a_clear_dag_import_error(cli_airflow, tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("experiments: {window: 15}\n")  # a duration without a unit
    env = {**cli_airflow.env, "TIDELINE_CONFIG": str(broken)}
    errors = describe_dags(env, tmp_path / "dags.json")["import_errors"]
    # ramp_snapshot.py too: its schedule is experiments.snapshot_interval; and
    # experiment_guardrails.py: its inlet asset is a table of the configured lake
    assert sorted(path.rsplit("/", 1)[-1] for path in errors) == [
        "daily_validation.py", "experiment_guardrails.py", "fraud_rules_shadow.py",
        "ramp_snapshot.py", "streaming_jobs.py", "training_samples_shadow.py"]
    assert all("experiments.window: 15 has no unit" in e for e in errors.values())


SPARK_TASKS = {("daily_validation", "recompute"), ("fraud_rules_shadow", "compare"),
               ("training_samples_shadow", "compare")}


def test_every_spark_submitting_task_waits_for_the_spark_pool(dag_structure):
    dags = dag_structure["dags"]
    submitting = {(dag_id, task_id) for dag_id, dag in dags.items()
                  for task_id in dag["spark_tasks"]}
    assert submitting == SPARK_TASKS
    pools = {(dag_id, task_id): pool for dag_id, dag in dags.items()
             for task_id, pool in dag["pools"].items()}
    assert {key for key, pool in pools.items() if pool == "tideline_spark"} == SPARK_TASKS
    assert {pools[key] for key in pools.keys() - SPARK_TASKS} == {"default_pool"}


def test_assets_trace_the_streaming_tables_through_the_recomputation_to_validation_results(
        dag_structure):
    dags = dag_structure["dags"]
    daily = dags["daily_validation"]
    assert daily["inlets"]["recompute"] == ["dead_letters", "raw_activations", "raw_events"]
    assert daily["outlets"]["recompute"] == ["batch_experiment_metrics"]
    for case in CASES:
        assert daily["inlets"][f"validate_{case}"] == [
            "batch_experiment_metrics", "experiment_metrics", "raw_activations", "raw_events"]
        assert daily["outlets"][f"validate_{case}"] == ["validation_results"]
    for dag_id, table in (("fraud_rules_shadow", "fraud_alerts"),
                          ("training_samples_shadow", "training_samples")):
        assert dags[dag_id]["inlets"]["compare"] == [table]
        assert dags[dag_id]["outlets"]["compare"] == ["validation_results"]
    # each streaming table reaches validation_results along the tasks' inlet -> outlet edges
    edges = {(inlet, outlet) for dag in dags.values() for task_id, inlets in dag["inlets"].items()
             for inlet in inlets for outlet in dag["outlets"][task_id]}
    reached = {"raw_events"}
    while grown := {outlet for inlet, outlet in edges if inlet in reached} - reached:
        reached |= grown
    assert reached == {"raw_events", "batch_experiment_metrics", "validation_results"}
    raw = dag_structure["dags"]["daily_validation"]["assets"]["raw_events"]
    lake = raw["location"].rsplit("/", 1)[0]
    assert lake.startswith("file:///")  # the history lake's folder, as an absolute file URI
    for dag in dags.values():
        for name, asset in dag["assets"].items():
            # a stable identity (a moved lake keeps its assets); the location in the extra
            assert asset == {"uri": f"x-tideline://lake/{name}", "location": f"{lake}/{name}"}


def test_tasks_that_do_not_alert_by_themselves_fail_through_the_alert_notifier(dag_structure):
    dags = dag_structure["dags"]
    notified = {(dag_id, task_id) for dag_id, dag in dags.items()
                for task_id, names in dag["failure_callbacks"].items() if names}
    for dag_id, dag in dags.items():
        for task_id, names in dag["failure_callbacks"].items():
            assert names in ([], ["AlertNotifier"]), (dag_id, task_id)
    periodic = {(dag_id, task_id) for dag_id in ("ramp_snapshot", "experiment_guardrails",
                                                 "maintenance")
                for task_id in dags[dag_id]["tasks"]}
    sensors = {("daily_validation", "wait_for_day_closed"), ("fraud_rules_shadow",
               "wait_for_alerts"), ("training_samples_shadow", "wait_for_samples")}
    assert notified == periodic | sensors | SPARK_TASKS
