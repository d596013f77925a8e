"""Names fixed by CONTRACTS.md: topics and Delta tables that users, tests and DAGs rely on."""

from __future__ import annotations

TOPIC_EVENTS = "events"
TOPIC_ACTIVATIONS = "experiment_activations"
TOPIC_FILTERED_EVENTS = "filtered_events"
TOPIC_FILTERED_ACTIVATIONS = "filtered_experiment_activations"

TABLE_EXPERIMENT_METRICS = "experiment_metrics"
TABLE_DEAD_LETTERS = "dead_letters"
TABLE_RAW_EVENTS = "raw_events"
TABLE_RAW_ACTIVATIONS = "raw_activations"
TABLE_ALERTS = "alerts"
TABLE_VALIDATION_RESULTS = "validation_results"

# Fraud detection (job fraud_rules, CONTRACTS.md section 7).
TOPIC_TRANSACTIONS = "transactions"
TOPIC_RULES = "rules"
TOPIC_FRAUD_ALERTS = "alerts"
TOPIC_CURRENT_RULES = "current_rules"
TOPIC_RULE_ERRORS = "rule_errors"
TABLE_FRAUD_ALERTS = "fraud_alerts"
FRAUD_TOPICS = (
    TOPIC_TRANSACTIONS, TOPIC_RULES, TOPIC_FRAUD_ALERTS, TOPIC_CURRENT_RULES, TOPIC_RULE_ERRORS,
)

# Training samples (job training_samples, CONTRACTS.md section 8).
TOPIC_VIEWS = "views"
TOPIC_ENGAGEMENTS = "engagements"
TOPIC_TRAINING_SAMPLES = "training_samples"
TABLE_TRAINING_SAMPLES = "training_samples"
TABLE_ORPHAN_ENGAGEMENTS = "orphan_engagements"
SAMPLES_TOPICS = (TOPIC_VIEWS, TOPIC_ENGAGEMENTS, TOPIC_TRAINING_SAMPLES)

EXPERIMENT_TOPICS = (
    TOPIC_EVENTS,
    TOPIC_ACTIVATIONS,
    TOPIC_FILTERED_EVENTS,
    TOPIC_FILTERED_ACTIVATIONS,
)

SNAPSHOT_HEADER = (
    "experiment_hash",
    "experiment_group",
    "group_ramp_time",
    "allocation_pct",
    "is_control",
)
RAMPS_HEADER = ("experiment_hash", "experiment_group", "ramp_ts", "allocation_pct", "is_control")
