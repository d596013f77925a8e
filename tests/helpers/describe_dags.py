"""Write the structure of the DAG folder as JSON to the path given as argument.

Run in a subprocess with the Airflow environment, so that the test process never imports
Airflow (which reads AIRFLOW_HOME once, at import) and the folder is parsed once per session.
"""

from __future__ import annotations

import json
import sys
from typing import Any


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
