"""Modules that Spark's own Python processes load at every query start, each in a fresh
interpreter, load without the heavy libraries they use only when they run (BENCHMARKS.md,
twenty-third session): pandas' import was most of the transformWithState schema worker's
~1 s, and the Kafka source's readers, client, pyarrow and settings 0.2-0.6 s of each Data
Source planner."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("pandas", "pyarrow", "confluent_kafka", "spark_jobs.settings")


def loaded_with(module: str) -> set[str]:
    """Which of HEAVY a fresh interpreter has loaded once it imports `module`."""
    probe = f"import sys, {module}; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    return set(out.split())


@pytest.mark.parametrize("module", [
    "spark_jobs.samples.processors.dedup_processor",  # Spark's driver reads their state
    "spark_jobs.fraud.processors.shard_processor",  # schemas in a fresh interpreter
    "spark_jobs.streaming.warmup_processor",
])
def test_stateful_processors_load_without_pandas(module: str):
    assert "pandas" not in loaded_with(module)


def test_the_kafka_source_loads_with_none_of_them():
    """Spark's Data Source planners unpickle the source class (lookup, create, plan)."""
    assert loaded_with("spark_jobs.streaming.kafka.source") == set()
