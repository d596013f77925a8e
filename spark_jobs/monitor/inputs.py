"""The streaming jobs the monitor deploys and the Kafka topics each one reads (for its lag).

Kept here, without importing the Spark job modules, so that the monitor stays light inside an
Airflow task; a unit test checks that the names match `spark_jobs.jobs.runner.JOBS`. The
monitor manages the experiment pipeline; `fraud_rules` is not (yet) deployed by Airflow.
"""

from __future__ import annotations

from spark_jobs.contracts import (
    TOPIC_ACTIVATIONS,
    TOPIC_EVENTS,
    TOPIC_FILTERED_ACTIVATIONS,
    TOPIC_FILTERED_EVENTS,
)

JOB_INPUT_TOPICS: dict[str, tuple[str, ...]] = {
    "filter_events": (TOPIC_EVENTS,),
    "filter_activations": (TOPIC_ACTIVATIONS,),
    "experiment_metrics": (TOPIC_FILTERED_EVENTS, TOPIC_FILTERED_ACTIVATIONS),
}
JOB_NAMES: tuple[str, ...] = tuple(JOB_INPUT_TOPICS)


class UnknownStreamingJobError(ValueError):
    """A job name the monitor does not manage."""


def check_job(job: str) -> str:
    """The name itself when it is a streaming job, else UnknownStreamingJobError."""
    if job not in JOB_INPUT_TOPICS:
        raise UnknownStreamingJobError(
            f"unknown streaming job {job!r} (known: {', '.join(JOB_NAMES)})"
        )
    return job
