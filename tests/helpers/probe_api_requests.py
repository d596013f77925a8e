"""Send requests to Airflow's real API app (`create_app`, core API with plugins) through a
TestClient and write what came back as JSON.

Usage: probe_api_requests.py REQUESTS.json ANSWERS.json, where each request is
{"path", "credential": "cookie" | "bearer" | null, "token": a name of TOKENS, "accept"},
optionally "method" (GET by default) and "headers".
Run in a subprocess with the Airflow environment: Airflow reads its configuration once per
process, at import, so the test process never imports it.
"""

from __future__ import annotations

import json
import sys
from typing import Any

GARBAGE_TOKEN = "not.a.jwt"


def tokens() -> dict[str, str]:
    """JWTs signed by this home's auth manager: the admin, and a user without a role."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    manager = get_auth_manager()
    return {
        "admin": manager.generate_jwt(SimpleAuthManagerUser(username="admin", role="ADMIN")),
        "no_role": manager.generate_jwt(SimpleAuthManagerUser(username="nobody", role=None)),
        "viewer": manager.generate_jwt(SimpleAuthManagerUser(username="v", role="VIEWER")),
        "garbage": GARBAGE_TOKEN,
    }


def send(app: Any, known: dict[str, str], request: dict[str, Any]) -> dict[str, Any]:
    from fastapi.testclient import TestClient

    client = TestClient(app, follow_redirects=False)
    headers = {"accept": request.get("accept") or "*/*", **request.get("headers", {})}
    token = known.get(request.get("token") or "")
    if request.get("credential") == "cookie" and token:
        client.cookies.set("_token", token)
    elif request.get("credential") == "bearer" and token:
        headers["authorization"] = f"Bearer {token}"
    answer = client.request(request.get("method", "GET"), request["path"], headers=headers)
    return {"status": answer.status_code, "location": answer.headers.get("location"),
            "body": answer.text[:5000]}


def main(requests_path: str, answers_path: str) -> None:
    from airflow.api_fastapi.app import create_app

    app = create_app(apps="core")
    known = tokens()
    with open(requests_path) as source:
        requests = json.load(source)
    with open(answers_path, "w") as out:
        json.dump([send(app, known, r) for r in requests], out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
