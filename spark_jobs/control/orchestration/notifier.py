"""Tideline's alerts as an Airflow notifier, the form Airflow 3 gives failure callbacks.

`AlertNotifier()` is passed as `on_failure_callback` (in the periodic DAGs' default args, on
the daily DAGs' tasks that do not alert by themselves); Airflow calls it with the task's
context and it sends the alert through the configured channels (`callbacks.py`,
`spark_jobs.control.alerts`), so the alert reaches the webhook, the e-mail and the `alerts`
table like every other Tideline alert.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseNotifier

from spark_jobs.control.orchestration.callbacks import send_failure_alert


class AlertNotifier(BaseNotifier):
    """Sends a failed task's alert (source: its DAG, kind task_failed, link to the run)."""

    def notify(self, context: Any) -> None:
        send_failure_alert(context)


alert_on_failure = AlertNotifier()
