"""Tideline's pages in the Airflow UI, served by the plugin's FastAPI app."""

from __future__ import annotations

from datetime import UTC, datetime
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


def test_validation_page_and_data_docs_are_served(make_settings):
    settings = make_settings()
    client = TestClient(build_app(settings))
    assert "No validation has run yet." in client.get("/validation").text
    upsert_rows(settings.lake.table("validation_results"), pa.table({
        "run_id": ["r1"], "case": ["single_ramp"], "check": ["drift"], "success": [False],
        "validated_at": pa.array([datetime(2026, 1, 2, tzinfo=UTC)], pa.timestamp("us", "UTC")),
        "details": ["{}"], "data_docs": pa.array([None], pa.string()),
    }), ["run_id", "case", "check"])
    text = client.get("/validation").text
    assert "single_ramp" in text and 'class="bad"' in text and "<th>details</th>" not in text

    docs = Path(settings.validation.data_docs)
    page = docs / "validations" / "drift" / "r1.html"
    upsert_rows(settings.lake.table("validation_results"), pa.table({
        "run_id": ["r2"], "case": ["reramp"], "check": ["drift"], "success": [True],
        "validated_at": pa.array([datetime(2026, 1, 3, tzinfo=UTC)], pa.timestamp("us", "UTC")),
        "details": ["{}"], "data_docs": [str(page)],
    }), ["run_id", "case", "check"])
    one_run = client.get("/validation", params={"run_id": "r2"}).text
    assert "reramp" in one_run and "single_ramp" not in one_run
    assert '<a href="data-docs/validations/drift/r1.html">Data Docs</a>' in one_run
    assert "No validation result for this run." in client.get(
        "/validation", params={"run_id": "other"}).text
    assert client.get("/data-docs/index.html").status_code == 404
    (docs / "index.html").write_text("<html>GX Data Docs</html>")
    assert client.get("/data-docs/index.html").text == "<html>GX Data Docs</html>"


def test_jobs_page_shows_every_streaming_job_and_its_problems(make_settings):
    settings = make_settings()
    text = TestClient(build_app(settings)).get("/jobs").text
    for job in ("filter_events", "filter_activations", "experiment_metrics"):
        assert job in text
    assert "STATE" in text and "stopped" in text


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
