"""Synthetic experiment traffic for Tideline, deterministic by seed.

The pure part turns a `TrafficSpec` (spec.py) into the exact byte sequence of Kafka messages
in production order (`generate`), so a test, a benchmark and a batch recomputation can all
replay the same traffic: its users (population.py), the records of each event-time chunk
(schedule.py), their bytes (messages.py) and the experiments' ramps (ramps.py). The Kafka
part (kafka.py: `produce`, `run_for`, `start_live_traffic`) sends that sequence with the
shared paced producing loop (spark_jobs.streaming.traffic).

Traffic is built to exercise every rule of CONTRACTS.md sections 2-4: ramp-ups inside and
after a period, activations outside periods, events before a user's first trigger,
duplicates, spammers over the hourly cap, malformed messages, equal timestamps and
bounded out-of-order production (never late when disorder_ms < lateness_ms).
"""

from spark_jobs.experiments.traffic.generate import (
    GenerationReport,
    TrafficGenerator,
    generate,
    tally,
)
from spark_jobs.experiments.traffic.kafka import (
    live_disorder_ms,
    produce,
    run_for,
    start_live_traffic,
)
from spark_jobs.experiments.traffic.messages import GeneratedRecord
from spark_jobs.experiments.traffic.ramps import first_ramp_up_ms, ramp_rows, write_ramps_csv
from spark_jobs.experiments.traffic.spec import (
    DEFAULT_START_MS,
    DUPLICATE,
    GOOD,
    HOUR_MS,
    KINDS,
    MALFORMED,
    MALFORMED_KINDS,
    SPAM,
    TrafficSpec,
)
from spark_jobs.streaming.traffic.sending import (
    LIVE_TRAFFIC_LINGER_MS,
    GenerationError,
    live_traffic_producer,
)

__all__ = [
    "DEFAULT_START_MS",
    "DUPLICATE",
    "GOOD",
    "HOUR_MS",
    "KINDS",
    "LIVE_TRAFFIC_LINGER_MS",
    "MALFORMED",
    "MALFORMED_KINDS",
    "SPAM",
    "GeneratedRecord",
    "GenerationError",
    "GenerationReport",
    "TrafficGenerator",
    "TrafficSpec",
    "first_ramp_up_ms",
    "generate",
    "live_disorder_ms",
    "live_traffic_producer",
    "produce",
    "ramp_rows",
    "run_for",
    "start_live_traffic",
    "tally",
    "write_ramps_csv",
]
