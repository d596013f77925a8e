"""The job catalog: every streaming job once, with what it reads and writes.

Settings, the runner, the monitor, the DAGs and the CLI all read this list (as Kedro's
registry), so a new job is one entry here plus its module. It imports no Spark and no job
module: the monitor reads it inside Airflow tasks, and the runner imports a job's module
only when it starts that job.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_jobs.contracts.tables import (
    TABLE_DEAD_LETTERS,
    TABLE_EXPERIMENT_METRICS,
    TABLE_FRAUD_ALERTS,
    TABLE_ORPHAN_ENGAGEMENTS,
    TABLE_PROVISIONAL_METRICS,
    TABLE_RAW_ACTIVATIONS,
    TABLE_RAW_EVENTS,
    TABLE_TRAINING_SAMPLES,
)
from spark_jobs.contracts.topics import (
    TOPIC_ACTIVATIONS,
    TOPIC_CURRENT_RULES,
    TOPIC_ENGAGEMENTS,
    TOPIC_EVENTS,
    TOPIC_FILTERED_ACTIVATIONS,
    TOPIC_FILTERED_EVENTS,
    TOPIC_FRAUD_ALERTS,
    TOPIC_RULE_ERRORS,
    TOPIC_RULES,
    TOPIC_TRAINING_SAMPLES,
    TOPIC_TRANSACTIONS,
    TOPIC_VIEWS,
)


@dataclass(frozen=True)
class Job:
    """One streaming job: `module` provides `build(spark, settings)` (the streaming plan),
    `sink(spark, settings)` (its foreachBatch sink) and `python_daemons(settings)` (what
    streaming/worker_warmup.py starts for it)."""

    name: str
    system: str
    module: str
    summary: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...] = ()
    tables: tuple[str, ...] = ()


JOBS: tuple[Job, ...] = (  # pipeline order: the monitor starts and lists them in this order
    Job(
        "filter_events", "experiments", "spark_jobs.experiments.jobs.filter_events",
        "critical event types, per-user hourly cap",
        inputs=(TOPIC_EVENTS,), outputs=(TOPIC_FILTERED_EVENTS,),
        tables=(TABLE_RAW_EVENTS, TABLE_DEAD_LETTERS),
    ),
    Job(
        "filter_activations", "experiments", "spark_jobs.experiments.jobs.filter_activations",
        "activations inside a period of the newest ramp snapshot",
        inputs=(TOPIC_ACTIVATIONS,), outputs=(TOPIC_FILTERED_ACTIVATIONS,),
        tables=(TABLE_RAW_ACTIVATIONS, TABLE_DEAD_LETTERS),
    ),
    Job(
        "experiment_metrics", "experiments", "spark_jobs.experiments.jobs.experiment_metrics",
        "cumulative volume, propensity and triggered users per window",
        inputs=(TOPIC_FILTERED_EVENTS, TOPIC_FILTERED_ACTIVATIONS),
        tables=(TABLE_EXPERIMENT_METRICS, TABLE_PROVISIONAL_METRICS, TABLE_DEAD_LETTERS),
    ),
    Job(
        "fraud_rules", "fraud", "spark_jobs.fraud.jobs.fraud_rules",
        "dynamic-rule fraud detection",
        inputs=(TOPIC_TRANSACTIONS, TOPIC_RULES),
        outputs=(TOPIC_FRAUD_ALERTS, TOPIC_CURRENT_RULES, TOPIC_RULE_ERRORS),
        tables=(TABLE_FRAUD_ALERTS, TABLE_DEAD_LETTERS),
    ),
    Job(
        "training_samples", "samples", "spark_jobs.samples.jobs.training_samples",
        "views joined with engagement labels",
        inputs=(TOPIC_VIEWS, TOPIC_ENGAGEMENTS), outputs=(TOPIC_TRAINING_SAMPLES,),
        tables=(TABLE_TRAINING_SAMPLES, TABLE_ORPHAN_ENGAGEMENTS, TABLE_DEAD_LETTERS),
    ),
)
JOB_NAMES: tuple[str, ...] = tuple(job.name for job in JOBS)
DEFAULT_DEPLOYED: tuple[str, ...] = tuple(j.name for j in JOBS if j.system == "experiments")


class UnknownJobError(ValueError):
    """A job name that is not in the catalog; the message lists the known ones."""


def job(name: str) -> Job:
    """The catalog entry of `name`, else UnknownJobError naming the known jobs."""
    for entry in JOBS:
        if entry.name == name:
            return entry
    raise UnknownJobError(f"unknown job {name!r} (known: {', '.join(JOB_NAMES)})")


def system_topics(system: str) -> tuple[str, ...]:
    """Every topic the jobs of one system read or write, in catalog order (created together
    so that a job can start before the one that feeds it)."""
    topics: dict[str, None] = {}
    for entry in JOBS:
        if entry.system == system:
            topics.update(dict.fromkeys((*entry.inputs, *entry.outputs)))
    return tuple(topics)
