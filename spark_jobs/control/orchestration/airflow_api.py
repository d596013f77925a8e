"""A small client of Airflow 3's public REST API (/api/v2) for the platform and tests.

It logs in like a user (simple auth manager: POST /auth/token with the admin password) and
covers only what Tideline needs: wait until the DAGs are parsed, unpause them, and follow
runs.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

RETRIES = 4
# A fresh API server on a machine busy starting Spark jobs has taken over 10 s to answer its
# first /dags (CI); a slower answer than this is retried (`request`).
DEFAULT_TIMEOUT_S = 30.0


class AirflowApiError(RuntimeError):
    """An API call failed or a wait timed out; the message says which and why."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class AirflowClient:
    def __init__(self, base_url: str, username: str, password: str,
                 timeout_s: float = DEFAULT_TIMEOUT_S):
        self.base_url = base_url.rstrip("/")
        self._credentials = {"username": username, "password": password}
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout_s)
        self._token: str | None = None

    def close(self) -> None:
        self._http.close()

    def _headers(self) -> dict[str, str]:
        if self._token is None:
            answer = self._http.post("/auth/token", json=self._credentials)
            if answer.status_code != 201:
                raise AirflowApiError(f"login failed: HTTP {answer.status_code} {answer.text}")
            self._token = answer.json()["access_token"]
        return {"Authorization": f"Bearer {self._token}"}

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """JSON of /api/v2<path>; logs in again once when the token has expired, and retries
        a server error (SQLite answers "database is locked" under load) or no answer in time
        (a busy machine) a few times. Every call Tideline makes is safe to repeat."""
        for attempt in range(1, RETRIES + 1):
            try:
                answer = self._http.request(method, f"/api/v2{path}", headers=self._headers(),
                                            **kwargs)
            except httpx.TransportError as exc:
                if attempt == RETRIES:
                    raise AirflowApiError(
                        f"{method} {path}: no answer from {self.base_url} after {RETRIES} "
                        f"attempts ({exc.__class__.__name__}: {exc})") from exc
                time.sleep(attempt)
                continue
            if answer.status_code == 401 and attempt == 1:
                self._token = None
                continue
            if answer.status_code >= 500 and attempt < RETRIES:
                time.sleep(attempt)
                continue
            if answer.is_error:
                raise AirflowApiError(f"{method} {path}: HTTP {answer.status_code} {answer.text}",
                                      answer.status_code)
            return answer.json() if answer.content else None
        raise AirflowApiError(f"{method} {path}: no answer after {RETRIES} attempts")

    def dags(self) -> list[dict[str, Any]]:
        """The DAGs Airflow has parsed (paused or not)."""
        return self.request("GET", "/dags", params={"limit": 100})["dags"]

    def unpause(self, dag_id: str) -> None:
        self.request("PATCH", f"/dags/{dag_id}", json={"is_paused": False})

    def dag_ids(self) -> list[str]:
        """Ids of the DAGs Airflow has parsed (paused or not)."""
        return sorted(d["dag_id"] for d in self.dags())

    def set_pool(self, name: str, slots: int, description: str) -> None:
        """Create the pool, or set its slots and description when it exists."""
        try:
            self.request("POST", "/pools", json={"name": name, "slots": slots,
                                                 "description": description})
        except AirflowApiError as exc:
            if exc.status != 409:
                raise
            # Airflow validates a pool's PATCH as a whole pool (name, slots, include_deferred)
            self.request("PATCH", f"/pools/{name}",
                         json={"pool": name, "slots": slots, "description": description,
                               "include_deferred": False})

    def pool(self, name: str) -> dict[str, Any]:
        return self.request("GET", f"/pools/{name}")

    def import_errors(self) -> list[dict[str, Any]]:
        return self.request("GET", "/importErrors")["import_errors"]

    def wait_for_dags(self, dag_ids: list[str], timeout_s: float) -> None:
        """Block until every DAG is parsed; on timeout the error lists the import errors."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if set(dag_ids) <= set(self.dag_ids()):
                return
            time.sleep(1.0)
        raise AirflowApiError(
            f"DAGs {sorted(set(dag_ids) - set(self.dag_ids()))} not parsed after "
            f"{timeout_s:.0f} s; import errors: {self.import_errors()}"
        )

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        """The DAG's runs, oldest logical date first."""
        params = {"limit": 100, "order_by": "logical_date"}
        return self.request("GET", f"/dags/{dag_id}/dagRuns", params=params)["dag_runs"]

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str | None]:
        """Task id -> state of one run (for failure messages)."""
        body = self.request("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances")
        return {ti["task_id"]: ti["state"] for ti in body["task_instances"]}

    def __enter__(self) -> AirflowClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
