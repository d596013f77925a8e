"""What a task failure alert says and sends: a failed task that does not alert by itself
still alerts (the DAGs' failure callback is `notifier.AlertNotifier`, which calls this; this
module stays free of Airflow, so its logic is tested without it).

Validation tasks alert per failed check with the numbers; a crashed recomputation, a
sensor that timed out waiting for the streaming job, or a failed maintenance or snapshot
run would otherwise only turn red in the grid, which nobody watches at night.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)


def failure_alert_fields(context: Mapping[str, Any]) -> dict[str, Any]:
    """Source, kind and summary of the alert for a failed task (pure, for tests)."""
    ti = context["ti"]
    exception = context.get("exception")
    reason = str(exception).splitlines()[0] if exception else "see the task log"
    return {
        "source": ti.dag_id,
        "kind": "task_failed",
        "summary": f"task {ti.task_id} failed: {reason}"[:500],
        "details": {"task_id": ti.task_id, "try_number": getattr(ti, "try_number", None)},
    }


def send_failure_alert(context: Mapping[str, Any]) -> None:
    """Send the alert of a failed task linking to its run; never raises. A failure whose
    exception says `already_alerted` (its check sent a detailed alert) sends nothing more.
    DAGs use it through `notifier.AlertNotifier`, Airflow's notifier form."""
    if getattr(context.get("exception"), "already_alerted", False):
        return
    try:
        from spark_jobs.control.alerts import Alert, send_alert
        from spark_jobs.control.orchestration.runs import run_url
        from spark_jobs.settings import load_settings

        settings = load_settings()
        send_alert(settings, Alert(run_url=run_url(settings, context),
                                   **failure_alert_fields(context)))
    except Exception:  # a callback that raises hides the task's own failure
        log.exception("could not send the failure alert")
