"""The streaming jobs the monitor deploys and the Kafka topics each one reads (for its lag).

Kept here, without importing the Spark job modules, so that the monitor stays light inside an
Airflow task; a unit test checks that the names match `spark_jobs.streaming.runner.JOBS`. Which of
them the monitor deploys is `monitor.jobs` (default: the experiment pipeline's three).
"""

from __future__ import annotations

from spark_jobs.contracts.topics import (
    TOPIC_ACTIVATIONS,
    TOPIC_ENGAGEMENTS,
    TOPIC_EVENTS,
    TOPIC_FILTERED_ACTIVATIONS,
    TOPIC_FILTERED_EVENTS,
    TOPIC_RULES,
    TOPIC_TRANSACTIONS,
    TOPIC_VIEWS,
)
from spark_jobs.settings import Settings

JOB_INPUT_TOPICS: dict[str, tuple[str, ...]] = {
    "filter_events": (TOPIC_EVENTS,),
    "filter_activations": (TOPIC_ACTIVATIONS,),
    "experiment_metrics": (TOPIC_FILTERED_EVENTS, TOPIC_FILTERED_ACTIVATIONS),
    "fraud_rules": (TOPIC_TRANSACTIONS, TOPIC_RULES),
    "training_samples": (TOPIC_VIEWS, TOPIC_ENGAGEMENTS),
}
JOB_NAMES: tuple[str, ...] = tuple(JOB_INPUT_TOPICS)  # every job the monitor can manage


def deployed_jobs(settings: Settings) -> tuple[str, ...]:
    """The jobs the monitor deploys and watches (`monitor.jobs`), in pipeline order."""
    return settings.monitor.jobs


class UnknownStreamingJobError(ValueError):
    """A job name the monitor does not manage."""


def check_job(job: str) -> str:
    """The name itself when it is a streaming job, else UnknownStreamingJobError."""
    if job not in JOB_INPUT_TOPICS:
        raise UnknownStreamingJobError(
            f"unknown streaming job {job!r} (known: {', '.join(JOB_NAMES)})"
        )
    return job
