"""Tiny pre-loaded inputs for bench/startup.py: a few hundred records per system, enough for
every job to run one real batch (parsing, state, outputs, dead letters) and no more, so a
run's time is its fixed cost.

The experiments traffic, ramps and snapshot follow the chaos test's preparation (Kafka time =
event time); fraud gets two rules and a few hundred transactions; samples get a few hundred
views with their engagements and, last, a view of the next day whose event time closes
every window.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

from spark_jobs.catalog import system_topics
from spark_jobs.contracts.topics import (
    TOPIC_ACTIVATIONS,
    TOPIC_ENGAGEMENTS,
    TOPIC_EVENTS,
    TOPIC_RULES,
    TOPIC_TRANSACTIONS,
    TOPIC_VIEWS,
)
from spark_jobs.settings import Settings
from spark_jobs.streaming.kafka.producer import make_producer, produce_all
from spark_jobs.streaming.kafka.topic_admin import ensure_topics

MINUTE = 60_000
T0 = 1_767_225_600_000  # 2026-01-01, the fraud and samples inputs' day
# the experiments' durations, matched by the traffic below (what the chaos test uses)
SECTIONS: dict[str, Any] = {
    "experiments": {"period": "20m", "window": "5m", "lateness": "1m", "dedup_ttl": "1m",
                    "cap_per_user_hour": 40},
    "samples": {"window": "20s", "lateness": "5s"},
}
FRAUD_RULES = [
    {"ruleId": 1, "ruleState": "ACTIVE", "groupingKeyNames": ["payeeId"],
     "aggregateFieldName": "paymentAmount", "aggregatorFunctionType": "SUM",
     "limitOperatorType": "GREATER", "limit": 300, "windowMinutes": 1},
    {"ruleId": 2, "ruleState": "ACTIVE", "groupingKeyNames": ["beneficiaryId"],
     "aggregateFieldName": "COUNT_FLINK", "aggregatorFunctionType": "SUM",
     "limitOperatorType": ">=", "limit": 12, "windowMinutes": 1},
]


def experiments_day(settings: Settings) -> datetime.date:
    """The UTC day the experiments traffic starts on (what the recomputation recomputes)."""
    spec = _experiments_spec()
    return datetime.datetime.fromtimestamp(spec.start_ms / 1000, datetime.UTC).date()


def _experiments_spec() -> Any:
    from spark_jobs.experiments.traffic import TrafficSpec

    return TrafficSpec(seed=14, duration_ms=40 * MINUTE, n_users=10, n_experiments=2,
                       events_per_user_hour=30, activations_per_user=6,
                       period_ms=20 * MINUTE, window_ms=5 * MINUTE, lateness_ms=MINUTE,
                       cap_per_user_hour=40, n_spammers=1, malformed_rate=0.01)


def load_experiments(settings: Settings) -> int:
    """Seeded traffic of ten users on events and activations, its ramps and a snapshot."""
    from spark_jobs.experiments.admin.metadata import add_ramps
    from spark_jobs.experiments.admin.snapshot import publish_snapshot
    from spark_jobs.experiments.core.periods import RampRow
    from spark_jobs.experiments.traffic import generate

    spec = _experiments_spec()
    records = list(generate(spec))
    add_ramps(settings.metadata.url, [RampRow(**row) for row in spec.ramp_rows()])
    publish_snapshot(settings, spec.start_ms + spec.duration_ms, None)
    ensure_topics(settings.kafka, system_topics("experiments"), settings.kafka.partitions)
    producer = make_producer(settings.kafka)
    clock, stamped = spec.start_ms, []
    for record in records:
        clock = max(clock, record.ts or clock)
        stamped.append((record, clock))
    for topic in (TOPIC_EVENTS, TOPIC_ACTIVATIONS):
        mine = [(r, at) for r, at in stamped if r.topic == topic]
        produce_all(producer, topic, [r.key for r, _ in mine], [r.value for r, _ in mine],
                    [at for _, at in mine])
    return len(records)


def load_fraud(settings: Settings, transactions: int = 300) -> int:
    """Two rules, then one transaction every 100 ms and a garbage one every 100."""
    messages = [(TOPIC_RULES, T0, json.dumps(rule)) for rule in FRAUD_RULES]
    for k in range(1, transactions + 1):
        at = T0 + 1000 + k * 100
        messages.append((TOPIC_TRANSACTIONS, at, json.dumps({
            "transactionId": k, "eventTime": at, "payeeId": 1 + k % 7,
            "beneficiaryId": 1 + k % 5, "paymentAmount": float(k % 97) + 0.25,
            "paymentType": "CSH"})))
        if k % 100 == 0:
            messages.append((TOPIC_TRANSACTIONS, at, f"garbage {k}"))
    ensure_topics(settings.kafka, system_topics("fraud"), settings.kafka.partitions)
    producer = make_producer(settings.kafka)
    for topic in (TOPIC_RULES, TOPIC_TRANSACTIONS):
        mine = [(at, value) for t, at, value in messages if t == topic]
        produce_all(producer, topic, ["k"] * len(mine), [v for _, v in mine],
                    [at for at, _ in mine])
    return len(messages)


def load_samples(settings: Settings, views: int = 200) -> int:
    """Seeded views and engagements (disorder below the lateness), then a next-day clock."""
    from spark_jobs.samples.traffic import SamplesTrafficSpec, generate_traffic

    spec = SamplesTrafficSpec(users=40, posts=200, views_per_s=20, window_ms=20_000,
                              max_disorder_ms=4_000, seed=14)
    records = generate_traffic(spec, views=views, start_ms=T0 + 3_600_000)
    tomorrow = T0 + 86_400_000 + 3_600_000
    clock = {"view_id": "clock", "user_id": 0, "post_id": 0, "ts": tomorrow}
    records.append((TOPIC_VIEWS, "0", json.dumps(clock).encode(), tomorrow))
    ensure_topics(settings.kafka, system_topics("samples"), settings.kafka.partitions)
    producer = make_producer(settings.kafka)
    for topic in (TOPIC_VIEWS, TOPIC_ENGAGEMENTS):
        mine = [r for r in records if r[0] == topic]
        produce_all(producer, topic, [r[1] for r in mine], [r[2] for r in mine],
                    [r[3] for r in mine])
    return len(records)


def load_all(settings: Settings) -> dict[str, int]:
    """Every system's tiny input on the settings' broker and lake; records per system."""
    return {"experiments": load_experiments(settings), "fraud": load_fraud(settings),
            "samples": load_samples(settings)}
