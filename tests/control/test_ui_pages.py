"""Tideline's pages in the Airflow UI, served by the plugin's FastAPI app."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from fastapi.testclient import TestClient

from spark_jobs.control.alerts import Alert, send_alert
from spark_jobs.control.ui.pages import build_app
from spark_jobs.streaming.lake.delta import upsert_rows

pytestmark = pytest.mark.integration


def test_alerts_page_lists_the_newest_alert_first_and_escapes_text(make_settings):
    settings = make_settings()
    client = TestClient(build_app(settings))
    assert "No alert so far." in client.get("/alerts").text
    send_alert(settings, Alert(source="streaming_jobs", kind="job_down", summary="first"))
    send_alert(settings, Alert(source="daily_validation", kind="drift",
                               summary="<b>drift</b> 5 %", experiment_hash="exp1_single"))
    text = client.get("/alerts").text
    assert text.index("&lt;b&gt;drift&lt;/b&gt; 5 %") < text.index("first")
    assert "exp1_single" in text and "<b>drift" not in text


def test_alerts_are_filtered_and_link_to_their_airflow_run(make_settings):
    settings = make_settings()
    client = TestClient(build_app(settings))
    run = "http://af.example/dags/daily_validation/runs/r1"
    send_alert(settings, Alert(source="streaming_jobs", kind="job_down", summary="job gone"))
    send_alert(settings, Alert(source="daily_validation", kind="drift", summary="drifted",
                               experiment_hash="exp1_single", run_url=run))
    send_alert(settings, Alert(source="daily_validation", kind="drift", summary="other drift",
                               experiment_hash="exp2_multi"))
    text = client.get("/alerts", params={"source": "daily_validation"}).text
    assert "drifted" in text and "other drift" in text and "job gone" not in text
    assert f'<a href="{run}" target="_top">Airflow run</a>' in text
    assert '<input name="source" value="daily_validation">' in text  # the filter kept
    both = client.get("/alerts", params={"kind": "drift", "experiment": "exp2_multi"}).text
    assert "other drift" in both and "drifted" not in both
    none = client.get("/alerts", params={"kind": "srm", "source": "", "experiment": ""}).text
    assert "No alert matches the filters." in none
    assert "<script>tlReload(30)</script>" in text


def test_validation_page_and_data_docs_are_served(make_settings):
    settings = make_settings()
    client = TestClient(build_app(settings))
    assert "No validation has run yet." in client.get("/validation").text
    upsert_rows(settings.lake.table("validation_results"), pa.table({
        "run_id": ["r1"], "case": ["single_ramp"], "check": ["drift"], "success": [False],
        "validated_at": pa.array([datetime(2026, 1, 2, tzinfo=UTC)], pa.timestamp("us", "UTC")),
        "details": ["{}"], "data_docs": pa.array([None], pa.string()),
        "logical_date": pa.array([date(2026, 1, 2)], pa.date32()),
        "run_url": pa.array([None], pa.string()),
    }), ["run_id", "case", "check"])
    text = client.get("/validation").text
    assert "single_ramp" in text and "<th>details</th>" not in text
    assert '<span class="badge state-failed" style="background:#dc2626">failed</span>' in text

    docs = Path(settings.validation.data_docs)
    page = docs / "validations" / "drift" / "r1.html"
    upsert_rows(settings.lake.table("validation_results"), pa.table({
        "run_id": ["r2"], "case": ["reramp"], "check": ["drift"], "success": [True],
        "validated_at": pa.array([datetime(2026, 1, 3, tzinfo=UTC)], pa.timestamp("us", "UTC")),
        "details": ["{}"], "data_docs": [str(page)],
        "logical_date": pa.array([date(2026, 1, 3)], pa.date32()),
        "run_url": ["http://af.example/dags/daily_validation/runs/r2"],
    }), ["run_id", "case", "check"])
    one_run = client.get("/validation", params={"run_id": "r2"}).text
    assert "reramp" in one_run and "single_ramp" not in one_run
    assert '<a href="data-docs/validations/drift/r1.html">Data Docs</a>' in one_run
    assert "No validation result for this run." in client.get(
        "/validation", params={"run_id": "other"}).text
    failed = client.get("/validation", params={"result": "failed"}).text
    assert "single_ramp" in failed and "reramp" not in failed
    assert '<option value="failed" selected>failed</option>' in failed
    assert "reramp" in client.get("/validation", params={"case": "reramp", "check": "drift",
                                                         "day": "2026-01-03"}).text
    assert "No validation result matches the filters." in client.get(
        "/validation", params={"day": "2026-01-09"}).text
    assert "Not a day: soon" in client.get("/validation", params={"day": "soon"}).text
    assert ('<a href="http://af.example/dags/daily_validation/runs/r2" target="_top">'
            "Airflow run</a>") in one_run
    assert client.get("/data-docs/index.html").status_code == 404
    (docs / "index.html").write_text("<html>GX Data Docs</html>")
    assert client.get("/data-docs/index.html").text == "<html>GX Data Docs</html>"


def test_jobs_page_is_a_table_with_state_colours_links_and_actions(make_settings):
    settings = make_settings(airflow={"base_url": "http://af.example"})
    client = TestClient(build_app(settings))
    text = client.get("/jobs").text
    for job in ("filter_events", "filter_activations", "experiment_metrics"):
        assert f"<tr><td>{job}</td><td><span class=\"badge state-stopped\"" in text
        assert f'<a href="jobs/{job}/log">log</a>' in text
        assert f'<a href="jobs/{job}/checkpoint">checkpoint</a>' in text
        assert (f'<a href="http://af.example/dags/streaming_jobs/tasks/watch_{job}" '
                'target="_top">DAG runs</a>') in text
        assert f'data-url="jobs/{job}/watch"' in text
        assert f'data-url="jobs/{job}/restart"' not in text  # not running: nothing to restart
    assert "<th>state</th>" in text and "<th>actions</th>" in text
    assert "<script>tlReload(15)</script>" in text and "refreshes every 15 s" in text
    assert "(no log yet at" in client.get("/jobs/filter_events/log").text
    assert "No checkpoint yet" in client.get("/jobs/filter_events/checkpoint").text
    from spark_jobs.control.monitor.supervisor import log_path

    log = log_path(settings, "filter_events")
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("".join(f"line {i}\n" for i in range(400)))
    tail = client.get("/jobs/filter_events/log").text
    assert "line 399" in tail and "line 100\n" in tail and "line 99\n" not in tail
    checkpoint = Path(settings.lake.checkpoint("filter_events"))
    for folder, batches in (("offsets", (0, 1, 12)), ("commits", (0, 1))):
        (checkpoint / folder).mkdir(parents=True)
        for batch in batches:
            (checkpoint / folder / str(batch)).write_text("v1")
    page = client.get("/jobs/filter_events/checkpoint").text
    assert "<tr><td>offsets</td><td>12</td></tr><tr><td>commits</td><td>1</td></tr>" in page
    assert client.get("/jobs/fraud_rules/log").status_code == 404  # not deployed
    assert client.post("/jobs/filter_events/dance").status_code == 404
    stopped = client.post("/jobs/filter_events/stop")
    assert stopped.json() == {"message": "filter_events: was not running"}


def test_a_running_unhealthy_job_is_orange_with_its_problem_and_spark_ui_link(make_settings):
    from spark_jobs.control.ui.jobs_view import job_rows

    settings = make_settings()
    status = {"job": "experiment_metrics", "state": "running", "healthy": False, "pid": 42,
              "input_rows_per_s": 1234.4, "processed_rows_per_s": None, "lag": 150_000,
              "watermark": "2026-03-01T10:00:00Z", "last_report_age_ms": 65_000,
              "restarts_in_window": 1,
              "problems": [{"kind": "lagging", "message": "lag 150,000 > 100,000"}]}
    app = {"app_id": "app-7", "ui": "http://127.0.0.1:4041"}
    [row] = job_rows(settings, [status], {"experiment_metrics": app})
    text = TestClient(build_app(settings)).get("/jobs").text  # renders with the same cells
    assert "badge" in text
    assert (row[1].text, row[1].colour) == ("running", "warning")
    assert row[2:10] == [42, "1,234", "-", "150,000", "2026-03-01T10:00:00Z", "1m05s", 1,
                         "lagging: lag 150,000 > 100,000"]
    assert [(link.text, link.top) for link in row[10]] == [
        ("log", False), ("Spark UI", True), ("checkpoint", False), ("DAG runs", True)]
    assert [action.text for action in row[11]] == ["Watch now", "Restart", "Stop"]


def test_jobs_page_counts_every_record_not_passed_on_by_job_and_reason(make_settings):
    """CONTRACTS section 9: the totals the progress listener keeps are on the jobs page."""
    from collections import Counter

    from spark_jobs.streaming.drops import add_batch
    from spark_jobs.streaming.progress import progress_dir

    settings = make_settings()
    folder = progress_dir(settings)
    folder.mkdir(parents=True, exist_ok=True)
    add_batch(folder, "filter_events", "lineage", 0, Counter({"non_critical_type": 1234,
                                                              "future": 2}))
    text = TestClient(build_app(settings)).get("/jobs").text
    assert "<td>filter_events</td><td>future</td><td>2</td>" in text
    assert "<td>filter_events</td><td>non_critical_type</td><td>1,234</td>" in text
