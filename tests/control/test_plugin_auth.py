"""The Tideline pages in the Airflow UI need Airflow's login, like Airflow's own API: every
path under /tideline, the static Data Docs and the results dashboard included.

The requests go to Airflow's real API app (`create_app`, with the Tideline plugin loaded from
its entry point) over a migrated SQLite home, in a subprocess (probe_api_requests.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from helpers.airflow_setup import MIGRATE_TIMEOUT_S, bare_setup, output_tail, run_airflow

from spark_jobs.control.orchestration.environment import REPO_ROOT
from spark_jobs.results.synthetic_metrics import KNOWN_EFFECTS, write_provisional

pytestmark = pytest.mark.airflow

PROBE_SCRIPT = Path(__file__).parents[1] / "helpers" / "probe_api_requests.py"
DOCS_PAGE = "validations/drift/run1.html"
DOCS_TEXT = "<html>GX Data Docs of run1</html>"
HTML = "text/html,application/xhtml+xml,*/*;q=0.8"
ALERTS = "/tideline/alerts"
DOCS = f"/tideline/data-docs/{DOCS_PAGE}"
RESULTS = "/tideline/results/"
RESULTS_API = f"{RESULTS}api/experiments"

# name -> (path, credential, token, accept)
REQUESTS: dict[str, tuple[str, str | None, str | None, str | None]] = {
    "api_anonymous": ("/api/v2/dags", None, None, None),
    "api_admin": ("/api/v2/dags", "bearer", "admin", None),
    "alerts_anonymous": (ALERTS, None, None, None),
    "docs_anonymous": (DOCS, None, None, None),
    "index_anonymous": ("/tideline/", None, None, None),
    "alerts_anonymous_browser": (ALERTS, None, None, HTML),
    "docs_anonymous_browser": (DOCS, None, None, HTML),
    "alerts_cookie": (ALERTS, "cookie", "admin", HTML),
    "docs_cookie": (DOCS, "cookie", "admin", HTML),
    "alerts_bearer": (ALERTS, "bearer", "admin", None),
    "alerts_garbage_cookie": (ALERTS, "cookie", "garbage", None),
    "alerts_garbage_bearer": (ALERTS, "bearer", "garbage", None),
    "alerts_garbage_cookie_browser": (ALERTS, "cookie", "garbage", HTML),
    "alerts_no_role": (ALERTS, "cookie", "no_role", HTML),
    "viewer_sees_jobs": ("/tideline/jobs", "bearer", "viewer", None),
    "results_anonymous": (RESULTS, None, None, None),
    "results_api_anonymous": (RESULTS_API, None, None, None),
    "results_anonymous_browser": (RESULTS, None, None, HTML),
    "results_garbage_bearer": (RESULTS_API, "bearer", "garbage", None),
    "results_cookie": (RESULTS, "cookie", "admin", HTML),
    "results_without_slash": (RESULTS.rstrip("/"), "cookie", "admin", HTML),
    "results_api_viewer": (RESULTS_API, "bearer", "viewer", None),
}
# the jobs page's actions (POST): an unknown action, so a request let through changes nothing
ACTION = "/tideline/jobs/filter_events/no_such_action"
PAGE_HEADER = {"X-Tideline-Action": "1"}
# name -> (credential, token, headers)
ACTIONS: dict[str, tuple[str, str, dict[str, str]]] = {
    "action_admin": ("bearer", "admin", PAGE_HEADER),
    "action_admin_cookie_without_header": ("cookie", "admin", {}),
    "action_viewer": ("bearer", "viewer", PAGE_HEADER),
}


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Every request of REQUESTS sent once to one app; name -> status, location, body."""
    root = tmp_path_factory.mktemp("plugin_auth")
    settings, env = bare_setup(root)
    page = Path(settings.validation.data_docs) / DOCS_PAGE
    page.parent.mkdir(parents=True)
    page.write_text(DOCS_TEXT)
    write_provisional(settings, KNOWN_EFFECTS[:1], windows=1)  # live results only
    migrated = run_airflow(env, "db", "migrate", timeout_s=MIGRATE_TIMEOUT_S)
    assert migrated.returncode == 0, output_tail(migrated)

    names = [*REQUESTS, *ACTIONS]
    requests = [dict(zip(("path", "credential", "token", "accept"), REQUESTS[n], strict=True))
                for n in REQUESTS]
    requests += [{"path": ACTION, "method": "POST", "credential": credential, "token": token,
                  "headers": headers} for credential, token, headers in ACTIONS.values()]
    (root / "requests.json").write_text(json.dumps(requests))
    probe = subprocess.run(
        [sys.executable, str(PROBE_SCRIPT), str(root / "requests.json"), str(root / "out.json")],
        env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=180,
    )
    assert probe.returncode == 0, output_tail(probe)
    return dict(zip(names, json.loads((root / "out.json").read_text()), strict=True))


def statuses(answers: dict[str, dict[str, Any]], *names: str) -> list[int]:
    return [answers[name]["status"] for name in names]


def test_anonymous_requests_are_refused_like_airflows_own_api(answers):
    assert statuses(answers, "api_anonymous", "alerts_anonymous", "docs_anonymous",
                    "index_anonymous") == [401] * 4
    assert answers["alerts_anonymous"]["body"] == '{"detail":"Not authenticated"}'
    assert DOCS_TEXT not in answers["docs_anonymous"]["body"]


def test_a_browser_without_login_is_sent_to_the_login_page_and_back(answers):
    for name, path in (("alerts_anonymous_browser", ALERTS), ("docs_anonymous_browser", DOCS)):
        answer = answers[name]
        assert answer["status"] == 303, answer
        location = urlsplit(answer["location"])
        assert location.path == "/auth/login"
        assert urlsplit(parse_qs(location.query)["next"][0]).path == path


def test_a_valid_login_by_cookie_or_bearer_token_sees_the_pages(answers):
    assert statuses(answers, "api_admin", "alerts_cookie", "docs_cookie",
                    "alerts_bearer") == [200] * 4
    assert "No alert so far." in answers["alerts_cookie"]["body"]
    assert answers["docs_cookie"]["body"] == DOCS_TEXT


def test_a_forged_token_or_a_user_without_a_role_is_refused(answers):
    assert statuses(answers, "alerts_garbage_cookie", "alerts_garbage_bearer") == [403, 403]
    assert "Invalid JWT token" in answers["alerts_garbage_bearer"]["body"]
    assert answers["alerts_garbage_cookie_browser"]["status"] == 303  # log in again
    assert answers["alerts_no_role"]["status"] == 403
    assert answers["alerts_no_role"]["body"] == '{"detail":"Forbidden"}'


def test_job_actions_need_the_page_header_and_the_right_to_run_dags(answers):
    assert answers["viewer_sees_jobs"]["status"] == 200  # a viewer sees the jobs page...
    assert answers["action_viewer"]["status"] == 403  # ...but may not operate the jobs
    assert answers["action_admin_cookie_without_header"]["status"] == 403  # another site's form
    assert answers["action_admin"]["status"] == 404  # let through: the app knows no such action
    assert "no action" in answers["action_admin"]["body"]


def test_the_results_dashboard_is_behind_the_same_login(answers):
    assert statuses(answers, "results_anonymous", "results_api_anonymous") == [401, 401]
    assert answers["results_api_anonymous"]["body"] == '{"detail":"Not authenticated"}'
    assert answers["results_garbage_bearer"]["status"] == 403
    login = answers["results_anonymous_browser"]
    assert login["status"] == 303 and urlsplit(login["location"]).path == "/auth/login"
    assert urlsplit(parse_qs(urlsplit(login["location"]).query)["next"][0]).path == RESULTS
    page = answers["results_cookie"]
    assert page["status"] == 200 and "<title>Tideline · Experiment results</title>" in page["body"]
    assert 'src="static/dashboard.js"' in page["body"]  # relative: resolved under the prefix
    moved = answers["results_without_slash"]
    assert moved["status"] in (307, 308) and urlsplit(moved["location"]).path == RESULTS
    listed = answers["results_api_viewer"]
    assert listed["status"] == 200, listed
    (experiment,) = json.loads(listed["body"])["experiments"]
    assert (experiment["hash"], experiment["final"]) == ("exp_win", False)
    assert experiment["live"]["triggered_users"] == {"control": 150, "treatment": 150}
