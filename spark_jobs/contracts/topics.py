"""Kafka topics fixed by CONTRACTS.md: the names users, tests and DAGs rely on."""

from __future__ import annotations

# Experiment analytics (CONTRACTS.md section 2).
TOPIC_EVENTS = "events"
TOPIC_ACTIVATIONS = "experiment_activations"
TOPIC_FILTERED_EVENTS = "filtered_events"
TOPIC_FILTERED_ACTIVATIONS = "filtered_experiment_activations"
EXPERIMENT_TOPICS = (
    TOPIC_EVENTS,
    TOPIC_ACTIVATIONS,
    TOPIC_FILTERED_EVENTS,
    TOPIC_FILTERED_ACTIVATIONS,
)

# Fraud detection (job fraud_rules, CONTRACTS.md section 7).
TOPIC_TRANSACTIONS = "transactions"
TOPIC_RULES = "rules"
TOPIC_FRAUD_ALERTS = "alerts"
TOPIC_CURRENT_RULES = "current_rules"
TOPIC_RULE_ERRORS = "rule_errors"
FRAUD_TOPICS = (
    TOPIC_TRANSACTIONS, TOPIC_RULES, TOPIC_FRAUD_ALERTS, TOPIC_CURRENT_RULES, TOPIC_RULE_ERRORS,
)

# Training samples (job training_samples, CONTRACTS.md section 8).
TOPIC_VIEWS = "views"
TOPIC_ENGAGEMENTS = "engagements"
TOPIC_TRAINING_SAMPLES = "training_samples"
SAMPLES_TOPICS = (TOPIC_VIEWS, TOPIC_ENGAGEMENTS, TOPIC_TRAINING_SAMPLES)
