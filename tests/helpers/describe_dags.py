"""Write the structure of the DAG folder as JSON to the path given as argument.

Run in a subprocess with the Airflow environment, so that the test process never imports
Airflow (which reads AIRFLOW_HOME once, at import) and the folder is parsed once per session.
"""

from __future__ import annotations

import json
import sys
from typing import Any

SUBMIT_MODULE = "spark_jobs.control.submit"


def submits_spark(task: Any) -> bool:
    """Whether the task's function imports the spark-submit helpers."""
    code = getattr(getattr(task, "python_callable", None), "__code__", None)
    return code is not None and SUBMIT_MODULE in code.co_names


def callback_names(task: Any) -> list[str]:
    """Class names of the task's failure callbacks (notifier instances or functions)."""
    callbacks = task.on_failure_callback or []
    callbacks = callbacks if isinstance(callbacks, list) else [callbacks]
    return sorted(type(c).__name__ for c in callbacks)


def describe() -> dict[str, Any]:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag()
    dags = {}
    for dag_id, dag in bag.dags.items():
        dags[dag_id] = {
            "timetable": type(dag.timetable).__name__,
            "cron": getattr(dag.timetable, "expression", None),
            "timezone": str(getattr(dag.timetable, "timezone", None)),
            "catchup": dag.catchup,
            "max_active_runs": dag.max_active_runs,
            "start_date": dag.start_date.isoformat() if dag.start_date else None,
            "params": sorted(dag.params.keys()),
            "pools": {task.task_id: task.pool for task in dag.tasks},
            "spark_tasks": sorted(t.task_id for t in dag.tasks if submits_spark(t)),
            "inlets": {t.task_id: sorted(a.name for a in t.inlets) for t in dag.tasks},
            "outlets": {t.task_id: sorted(a.name for a in t.outlets) for t in dag.tasks},
            "assets": {a.name: {"uri": a.uri, "location": a.extra.get("location")}
                       for t in dag.tasks for a in [*t.inlets, *t.outlets]},
            "failure_callbacks": {t.task_id: callback_names(t) for t in dag.tasks},
            "tasks": {
                task.task_id: {
                    "upstream": sorted(task.upstream_task_ids),
                    "trigger_rule": getattr(task.trigger_rule, "value", task.trigger_rule),
                }
                for task in dag.tasks
            },
        }
    return {"import_errors": bag.import_errors, "dags": dags}


if __name__ == "__main__":
    with open(sys.argv[1], "w") as out:
        json.dump(describe(), out)
